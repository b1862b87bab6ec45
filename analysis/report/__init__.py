"""Write report/ from a results directory: tables (Markdown, CSV, LaTeX), figures (PNG; also
SVG with svg=True, `report --svg`) and REPORT.md. Same raw results in, byte-identical files
out.

This module is the report's only reader and writer: it loads the data and the prose
template (read_data), runs the sections of sections/__init__.py (pure functions), puts
their blocks together with figures numbered in order (assemble), and writes every file
and every figure (write).
"""

import json
from pathlib import Path

import matplotlib

from analysis.load import LoadError, load_results, raw_exists, raw_path, read_raw_text
from analysis.report import figures as F
from analysis.report.microbench_tables import MicrobenchError, parse_benchmarks
from analysis.report.sections import SECTIONS
from analysis.report.sections.base import Fig, Prose, ReportData

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "report" / "templates" / "report.md"


def shown_path(path) -> str:
    """A path relative to the repository if inside it, else its name (the report must not
    depend on where the repository is checked out)."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return p.name


PERF_RESULTS = REPO / "results" / "perf"


def latest_perf(root=PERF_RESULTS) -> Path | None:
    """The newest complete bench/perf.py results folder (results/perf/<UTC time>/runs.csv,
    plain or gzipped; complete: run without --only, so the section has every kind of
    configuration), else the newest of any, or None."""
    runs = sorted(p for p in Path(root).glob("*") if raw_exists(p / "runs.csv"))
    complete = [p for p in runs if "--only" not in _perf_argv(p)]
    return (complete or runs or [None])[-1]


def _perf_argv(run: Path) -> list:
    """The options a perf run was started with (its meta.json), [] when unreadable."""
    try:
        argv = json.loads((run / "meta.json").read_text()).get("argv", [])
    except (OSError, ValueError, AttributeError):
        return []
    return argv if isinstance(argv, list) else []


def read_data(results_dir, microbench=None, template=TEMPLATE, perf=None) -> ReportData:
    """Everything the sections need. Raises LoadError on bad input."""
    results = load_results(results_dir)
    try:
        prose = Prose(Path(template).read_text())
    except OSError as exc:
        raise LoadError(f"{template}: cannot read the report template: {exc}") from None
    mb, context, shown = None, {}, None
    if microbench is not None and raw_path(microbench).exists():
        microbench = raw_path(microbench)  # NAME, else NAME.gz
        try:
            doc = json.loads(read_raw_text(microbench))
            mb = parse_benchmarks(doc, str(microbench))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError, MicrobenchError,
                KeyError) as exc:
            raise LoadError(f"{microbench}: not kv_bench JSON: {exc}") from None
        context, shown = doc.get("context") or {}, shown_path(microbench)
    perf_data = None
    if perf is not None:
        from analysis.report.limit_ratios import load_run
        try:
            perf_data = load_run(perf)
        except (OSError, ValueError, KeyError) as exc:
            raise LoadError(f"{perf}: not a bench/perf.py results folder: {exc}") from None
    return ReportData(results=results, results_shown=shown_path(results_dir), prose=prose,
                      microbench=mb, microbench_context=context, microbench_shown=shown,
                      perf=perf_data, perf_shown=shown_path(perf) if perf else None)


def assemble(sections, prose, svg: bool = False) -> tuple:
    """(REPORT.md text, {path: text}, [(Fig, number)]) from the sections' output: blocks
    joined by blank lines, each Fig replaced by its numbered image and caption (and, with
    svg, a link to its SVG)."""
    md, files, figs = [], {}, []
    for sec in sections:
        for block in sec.blocks:
            if isinstance(block, Fig):
                figs.append(block)
                block = prose("figure_svg" if svg else "figure", caption=block.caption,
                              name=block.name, number=len(figs))
            md.append(block.rstrip("\n"))
        files.update(sec.files)
    return "\n\n".join(md) + "\n", files, figs


def save_figure(fig, out_dir: Path, name: str, svg: bool = False) -> list:
    """name.png, and with svg name.svg too, reproducible (no dates, fixed SVG hash salt in
    F.RC)."""
    paths = [out_dir / f"{name}.png"]
    fig.savefig(paths[0], metadata={"Software": None})
    if svg:
        paths.append(out_dir / f"{name}.svg")
        fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    return paths


def write(out: Path, report_md: str, files: dict, figs: list, name: str = "REPORT.md",
          svg: bool = False) -> list:
    """Writes report_md as `name`, the files and the figures (PNG; with svg also SVG) under
    out; returns the paths, sorted."""
    written = []
    for rel, text in {**files, name: report_md}.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    if figs:
        (out / "figures").mkdir(parents=True, exist_ok=True)
    for f in figs:
        written += save_figure(f.figure, out / "figures", f.name, svg)
    return sorted(set(written))


def build_report(results_dir, out_dir, microbench=None, perf=None, svg=False) -> list:
    """Reads results_dir (and the microbenchmark JSON, if given and present, plain or
    gzipped), writes out_dir/{REPORT.md, tables/, figures/} (figures as PNG; with svg also
    as SVG, linked under each caption). Returns the written paths, sorted. Raises
    load.LoadError on bad input."""
    data = read_data(results_dir, microbench, perf=perf)
    with matplotlib.rc_context(F.RC):  # style at drawing and at saving time
        sections = [s for s in (section(data) for section in SECTIONS) if s is not None]
        report_md, files, figs = assemble(sections, data.prose, svg)
        return write(Path(out_dir), report_md, files, figs, svg=svg)


def write_perf_section(perf_dir, out_dir, svg=False) -> list:
    """The Performance section alone from a bench/perf.py results folder, written as
    out_dir/{performance.md, tables/, figures/} (bench/perf.py leaves it beside its raw
    results; svg as in build_report). Returns the written paths, sorted."""
    from analysis.report.limit_ratios import load_run
    from analysis.report.sections.performance import perf_section
    runs, meta = load_run(perf_dir)
    prose = Prose(TEMPLATE.read_text())
    with matplotlib.rc_context(F.RC):
        md, files, figs = assemble([perf_section(runs, meta, shown_path(perf_dir), prose)],
                                   prose, svg)
        return write(Path(out_dir), md, files, figs, name="performance.md", svg=svg)
