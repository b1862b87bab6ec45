"""docs/grading.md's "Adding a check" is true: its three blocks (the module, the record, the
line of points), added as it says to a copy of analysis/, make a check the worker runs by
its record, the evidence rule judges and the score counts. The runner's servers are real
fixture servers started outside the sandbox (a grading in bubblewrap is a slow test's); the
worker's own step runs it (worker._run), its start() the one thing put in the sandbox's
place."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from analysis.tests.helpers import built_fixture

REPO = Path(__file__).resolve().parents[2]

RUN = r'''
import json, sys
from pathlib import Path
from analysis.grade import labs, score, worker
from analysis.grade import records as C
from analysis.grade.checks import closes
from analysis.grade.checks import evidence as E
from analysis.grade.context import Ctx
from analysis.launch.procs import pick_port
from analysis.launch.server_spec import Place, ServerSpec, launch


class Up:
    def __init__(self, srv):
        self.srv, self.port = srv, srv.listen_port

    def stop(self):
        self.srv.stop()


def start(ctx, bin_dir, name, n, tag):
    folder = Path(sys.argv[2]) / Path(bin_dir).name / tag
    folder.mkdir(parents=True)
    srv = launch(ServerSpec(name, "kit", Path(bin_dir) / name), n, pick_port(),
                 Place(folder, kit_work=folder, ready_timeout=10.0),
                 log_file=folder.with_suffix(".log"))
    return Up(srv.start()), ""


closes.start = start
rec = C.BY_ID["closes"]
lab = labs.by_name("2019-2023")
out = {"in_lab": "closes" in lab.checks, "skippable": list(C.SKIPPABLE)}
for bin_dir in sys.argv[1].split(","):
    ctx = Ctx({"request_timeout_s": 1.0}, None)
    ctx.lab, ctx.bin_dir, ctx.present = lab, Path(bin_dir), ["main1"]
    checks = E.apply_all([worker._run(ctx, rec)], {"main1": {10: {"requests_ok": 1000}}})
    sc = score.of({"checks": checks}, score.load_weights(score.DEFAULT_WEIGHTS))
    out[Path(bin_dir).name] = {"status": sc.checks[0]["status"], "points": sc.total,
                               "max": sc.maximum, "evidence": sc.checks[0]["evidence"],
                               "fixes": sc.checks[0]["fixes"]}
print(json.dumps(out))
'''


def blocks() -> dict:
    """The section's code blocks by the file their first line names."""
    text = (REPO / "docs" / "grading.md").read_text()
    section = text.split("## Adding a check", 1)[1].split("\n## ", 1)[0]
    out = {}
    for body in re.findall(r"```(?:python|toml)\n(.*?)```", section, re.S):
        first, rest = body.split("\n", 1)
        out[first.lstrip("# ").split(",")[0]] = rest
    return out


def test_the_documented_check_is_added_as_the_docs_say_and_graded(tmp_path):
    b = blocks()
    assert set(b) == {"analysis/grade/checks/closes.py", "analysis/grade/records.py",
                      "analysis/grade_weights.toml"}
    copy = tmp_path / "code"
    shutil.copytree(REPO / "analysis", copy / "analysis",
                    ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (copy / "analysis/grade/checks/closes.py").write_text(b["analysis/grade/checks/closes.py"])
    records = copy / "analysis/grade/records.py"
    text = records.read_text()
    last = "\n)\nCHECKS = "                     # RECORDS' closing parenthesis
    assert text.count(last) == 1
    record = "".join("    " + line + "\n" for line in b["analysis/grade/records.py"].splitlines())
    records.write_text(text.replace(last, "\n" + record.rstrip("\n") + last))
    weights = copy / "analysis/grade_weights.toml"
    wt = weights.read_text()
    weights.write_text(wt.replace("[points]\n", "[points]\n" + b["analysis/grade_weights.toml"], 1))

    good = built_fixture("correct", tmp_path / "good")
    runs = tmp_path / "runs"
    runs.mkdir()
    p = subprocess.run([sys.executable, "-c", RUN, str(good), str(runs)], cwd=copy,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["in_lab"] and "closes" not in got["skippable"]
    assert got["correct"]["status"] == "pass", got
    assert (got["correct"]["points"], got["correct"]["max"]) == (5, 5)
    assert "main1: closed after its reply" in got["correct"]["evidence"]
    assert "judged: 1 servers whose close was seen" in got["correct"]["evidence"]
    assert got["correct"]["fixes"] == []
