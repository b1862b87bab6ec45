"""report: files made, non-empty, and byte-identical when rebuilt from the same raw data."""

import filecmp
import json
import shutil

import pytest

from analysis.report import build_report
from analysis.tests.helpers import FIXTURES, cli

# Each test renders a whole report (matplotlib): seconds to a minute apiece.
pytestmark = [pytest.mark.slow]

SMALL = FIXTURES / "results_small"
FIGURES = ["plot_mean_latency", "plot_latency_distribution", "plot_wait_hold",
           "plot_latency_cdf", "plot_saturation", "plot_latency_vs_n",
           "plot_sweep_read_ratio", "plot_sweep_delay", "plot_sweep_connection"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "a"
    build_report(SMALL, out)
    return out


def test_report_writes_tables_figures_and_text(built):
    tmp_path = built
    for name in FIGURES:
        p = tmp_path / "figures" / f"{name}.png"
        assert p.stat().st_size > 1000, p
    assert not list((tmp_path / "figures").glob("*.svg"))  # SVG only with --svg
    for t in ("table_mean", "table_median", "table_ci95", "table_speedup"):
        for ext in ("md", "csv", "tex"):
            assert (tmp_path / "tables" / f"{t}.{ext}").stat().st_size > 0
    md = (tmp_path / "REPORT.md").read_text()
    assert "| main1 (one mutex) | 8.32E+00 | 8.32E+00 | 8.32E+00 |" in md
    assert "| n | 10 | 100 | 1000 |" in md
    assert "Table 2: Median" in md and md.count("![") == len(FIGURES)
    assert "[SVG]" not in md
    assert "Synthetic CPU, 2 logical cores" in md


def _same_files(a, b, skip=()):
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.name not in skip)
    _, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    return len(files), mismatch + errors


def test_report_is_reproducible_byte_for_byte(built, tmp_path):
    a, b = built, tmp_path / "b"
    build_report(SMALL, b)
    count, bad = _same_files(a, b)
    assert count > 30 and not bad, bad
    # The same raw data elsewhere: tables and figures identical; REPORT.md differs only in
    # the line naming the results directory.
    copy = tmp_path / "copy" / SMALL.name
    shutil.copytree(SMALL, copy)
    build_report(copy, tmp_path / "c")
    count, bad = _same_files(a, tmp_path / "c", skip=("REPORT.md",))
    assert not bad, bad
    diff = [x for x, y in zip((a / "REPORT.md").read_text().splitlines(),
                              (tmp_path / "c" / "REPORT.md").read_text().splitlines()) if x != y]
    assert len(diff) == 1 and "raw results in" in diff[0]


def test_report_cli_and_bad_input(tmp_path):
    d = tmp_path / "lab_only"
    d.mkdir()
    shutil.copy(SMALL / "lab.csv", d)
    r = cli("report", "--results", d, "--out", tmp_path / "out", "--microbench", "none")
    assert r.returncode == 0, r.stderr
    assert "| Microbenchmarks | not included |" in (tmp_path / "out" / "REPORT.md").read_text()
    assert not list((tmp_path / "out" / "figures").glob("microbench_*"))
    r = cli("report", "--results", tmp_path / "nothing", "--out", tmp_path / "o2")
    assert r.returncode == 2 and "not a directory" in r.stderr  # a bad path: refused, exit 2
    assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    r = cli("report", "--results", tmp_path / "empty", "--out", tmp_path / "o3")
    assert r.returncode == 1 and "nothing to report" in r.stderr


def test_report_svg_on_demand(tmp_path):
    """--svg: every figure also as SVG, linked under its caption; the PNGs, the tables and
    the rest of REPORT.md are what the report makes without it."""
    d = tmp_path / "lab_only"
    d.mkdir()
    shutil.copy(SMALL / "lab.csv", d)  # 3 lab figures (and the committed perf run's)
    for out, extra in (("png", []), ("svg", ["--svg"])):
        r = cli("report", "--results", d, "--out", tmp_path / out, "--microbench", "none",
                *extra)
        assert r.returncode == 0, r.stderr
    png, svg = tmp_path / "png", tmp_path / "svg"
    names = sorted(p.stem for p in (png / "figures").glob("*.png"))
    assert len(names) >= 3 and not list((png / "figures").glob("*.svg"))
    assert sorted(p.stem for p in (svg / "figures").glob("*.svg")) == names
    assert all((svg / "figures" / f"{n}.svg").read_text().startswith("<?xml") for n in names)
    count, bad = _same_files(png, svg, skip=("REPORT.md",))
    assert count > 10 and not bad, bad
    md_png, md_svg = (png / "REPORT.md").read_text(), (svg / "REPORT.md").read_text()
    assert "[SVG]" not in md_png
    for n in names:
        assert f"* ([SVG](figures/{n}.svg))\n" in md_svg
    assert md_svg.count(" ([SVG](") == len(names)
    stripped = "\n".join(line.split(" ([SVG](")[0] for line in md_svg.splitlines()) + "\n"
    assert stripped == md_png


def test_report_with_lab_only(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    shutil.copy(SMALL / "lab.csv", d)
    build_report(d, tmp_path / "out")
    md = (tmp_path / "out" / "REPORT.md").read_text()
    assert "Table 1" in md and "Sweeps" not in md
    figures = sorted(p.name for p in (tmp_path / "out" / "figures").glob("*.png"))
    assert figures == ["plot_latency_distribution.png", "plot_latency_vs_n.png",
                       "plot_mean_latency.png"]


def test_report_with_microbench_fixture_is_reproducible(tmp_path):
    mb = FIXTURES / "microbench_tiny.json"
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        r = cli("report", "--results", SMALL, "--out", out, "--microbench", mb)
        assert r.returncode == 0, r.stderr
    md = (a / "REPORT.md").read_text()
    assert "| Microbenchmarks | `analysis/tests/fixtures/microbench_tiny.json` |" in md
    assert md.index("## Microbenchmarks") > md.index("## Sweeps")
    assert md.index("## Microbenchmarks") < md.index("## Method")
    assert list((a / "figures").glob("microbench_*.png"))
    count, bad = _same_files(a, b)
    assert count > 30 and not bad, bad
    # (--microbench none: test_report_cli_and_bad_input)
    r = cli("report", "--results", SMALL, "--out", tmp_path / "d", "--microbench",
            tmp_path / "missing.json")
    assert r.returncode == 2 and "argument --microbench:" in r.stderr  # refused, exit 2


def test_a_new_section_is_one_function_and_one_line(tmp_path, monkeypatch):
    """The seam for new sections (docs/analysis.md): a pure function returning blocks,
    figures and files, added to SECTIONS; the writer numbers its figure after the others
    and writes its files."""
    from analysis import report as R
    from analysis.report import figures as F
    from analysis.report.sections.base import Fig, Section

    def extra(data):
        fig, ax = F.new_figure(figsize=(3, 2))
        ax.plot([1, 2], [3, 4])
        return Section(files={"tables/extra.csv": "a,b\n1,2\n"}).add(
            "## Extra", Fig("extra_plot", "An extra figure.", fig)).bullets(["one", "two"])

    monkeypatch.setattr(R, "SECTIONS", [*R.SECTIONS[:-1], extra, R.SECTIONS[-1]])
    lab_only = tmp_path / "lab_only"
    lab_only.mkdir()
    shutil.copy(SMALL / "lab.csv", lab_only)  # 3 lab figures, quick to draw
    written = R.build_report(lab_only, tmp_path / "out")
    tmp_path = tmp_path / "out"
    md = (tmp_path / "REPORT.md").read_text()
    assert "*Figure 4: An extra figure.*" in md
    assert md.index("## Extra") < md.index("## Method")
    assert "\n- one\n- two\n" in md
    assert (tmp_path / "tables" / "extra.csv").read_text() == "a,b\n1,2\n"
    assert tmp_path / "figures" / "extra_plot.png" in written


def test_sections_write_no_files(tmp_path, monkeypatch):
    """Sections are pure: run in an empty working directory they create nothing."""
    from analysis.report import latest_perf, read_data
    from analysis.report.sections import SECTIONS

    assert latest_perf() is not None  # the committed bench/perf.py run
    data = read_data(SMALL, FIXTURES / "microbench_tiny.json", perf=latest_perf())
    import pandas as pd  # load agents (runner --client-host): two agents and the merged row
    data.results["agents"] = pd.DataFrame(
        [{"experiment": "lab", "kind": None, "value": None, "server": "main1", "n": 10,
          "rep": 1, "agent": a, "host": h, "threads": t, "throughput_rps": x,
          "throughput_share": x / 300, "lat_p50_us": 9.0, "lat_p99_us": 20.0,
          "saturated": False}
         for a, h, t, x in (("1", "ssh a", 50, 100.0), ("2", "ssh b", 50, 200.0),
                            ("all", None, 100, 300.0))])
    monkeypatch.chdir(tmp_path)
    out = [s(data) for s in SECTIONS]
    assert all(o is not None for o in out) and not list(tmp_path.iterdir())


def test_prose_template_blocks():
    from analysis.report.sections.base import Prose

    p = Prose("<!-- header -->\n<!-- block a -->\nHello $who.\n\n<!-- block b -->\n$$5\n")
    assert p("a", who="you") == "Hello you." and p("b") == "$5"
    with pytest.raises(KeyError):
        p("a")


def test_committed_report_is_regenerated_byte_for_byte(tmp_path):
    """report/ is what `python -m analysis report` makes from the committed results today:
    regenerating gives identical files (after a change to the analysis, regenerate it:
    python -m analysis report --results results/<dir> --out report/)."""
    from analysis.load import raw_path
    from analysis.tests.helpers import REPO

    committed = REPO / "report"
    results = sorted(p for p in (REPO / "results").iterdir()
                     if (p / "metadata.json").is_file())
    mb = raw_path(REPO / "results" / "microbench" / "microbench.json")  # or .json.gz
    if not (committed / "REPORT.md").is_file() or not results:
        pytest.skip("no committed report or results")
    from analysis.report import latest_perf
    build_report(results[-1], tmp_path, microbench=mb if mb.is_file() else None,
                 perf=latest_perf())
    count, bad = _same_files(tmp_path, committed)
    assert count > 40 and not bad, f"regenerate report/: these differ: {bad}"
    extra = {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()
             and "templates" not in p.parts} - {p.relative_to(tmp_path)
                                                for p in tmp_path.rglob("*") if p.is_file()}
    assert not extra, f"stale files in report/: {sorted(extra)}"


def test_the_report_takes_the_newest_complete_perf_run(tmp_path):
    """A run made with --only (some kinds of configuration) is newer than the last complete
    one: the report's Performance section keeps the complete run; with only partial runs
    it takes the newest of them."""
    from analysis.report import latest_perf

    def run(name, argv):
        (tmp_path / name).mkdir()
        (tmp_path / name / "runs.csv").write_text("cell\n")
        (tmp_path / name / "meta.json").write_text(json.dumps({"argv": argv}))
    run("20260101T000000Z", ["--only", "clients"])
    assert latest_perf(tmp_path).name == "20260101T000000Z"
    run("20260102T000000Z", ["--rounds", "5"])
    run("20260103T000000Z", ["--only", "throughput", "--rounds", "5"])
    assert latest_perf(tmp_path).name == "20260102T000000Z"
    (tmp_path / "20260104T000000Z").mkdir()
    (tmp_path / "20260104T000000Z" / "runs.csv").write_text("cell\n")
    (tmp_path / "20260104T000000Z" / "meta.json").write_text("{not json")
    assert latest_perf(tmp_path).name == "20260104T000000Z"  # unreadable: taken as complete
