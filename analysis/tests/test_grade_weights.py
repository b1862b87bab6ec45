"""The weights file tied to the records: every check has its line of points in the shipped
file, every line names a check, and a key that names nothing (a misspelt check, threshold
or table) is refused with one line, on the command line too (exit 2)."""

import re

import pytest

from analysis.grade import cli, score
from analysis.grade import records as C

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def test_the_shipped_weights_have_a_line_for_every_check_and_only_for_checks():
    data = tomllib.loads(score.DEFAULT_WEIGHTS.read_text())
    checks = {c.id for c in C.CHECKS}
    assert set(data["points"]) == checks
    for name, table in data.get("lab", {}).items():
        assert set(table.get("points", {})) <= checks, name
    assert set(data.get("thresholds", {})) <= set(score.THRESHOLDS)
    assert not {m.id for m in C.MEASUREMENTS} & set(data["points"]), "a measurement earns nothing"
    score.load_weights(score.DEFAULT_WEIGHTS)


@pytest.mark.parametrize("text, words", [
    ("[points]\nbuild = 5\nclosses = 5\n", "points.closses is not known"),
    ("[points]\nbuild = 5\nprobe = 5\n", "points.probe is not known"),  # a measurement
    ("[points]\nbuild = 5\n[thresholds]\nspeed_ration = 2\n", "thresholds.speed_ration is not"),
    ("[points]\nbuild = 5\n[visibility]\ntimming = \"hidden\"\n", "visibility.timming is not"),
    ("[point]\nbuild = 5\n", "point is not known"),
    ('[points]\nbuild = 5\n[lab."2024+".points]\ndesgin = 3\n', "lab.'2024+'.points.desgin is"),
])
def test_a_key_that_names_nothing_is_refused_with_one_line(tmp_path, text, words):
    w = tmp_path / "w.toml"
    w.write_text(text)
    with pytest.raises(score.WeightsError, match=re.escape(words)) as e:
        score.load_weights(w)
    assert "\n" not in str(e.value)


def test_the_command_line_refuses_a_misspelt_check_with_exit_2(tmp_path, capsys):
    w = tmp_path / "w.toml"
    w.write_text("[points]\nbuild = 5\nconsistancy = 20\n")
    sub = tmp_path / "alice"
    sub.mkdir()
    with pytest.raises(SystemExit) as e:
        cli.main([str(sub), "--weights", str(w), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("points.consistancy is not known (one of: "
                            + ", ".join(c.id for c in C.CHECKS) + ")"), err
    assert not (tmp_path / "out").exists()


def test_a_check_without_a_line_of_points_says_it_is_worth_nothing(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text("[points]\nbuild = 5\n")
    ev = {"checks": [{"id": "build", "title": "B", "status": "pass", "evidence": []},
                     {"id": "idle", "title": "I", "status": "pass", "evidence": []}]}
    sc = score.of(ev, score.load_weights(w))
    rules = {row[0]: row[-1] for row in score.how_rows(sc)}
    assert rules == {"B": "all or nothing",
                     "I": "no line of points in the weights file: worth nothing"}
    assert (sc.total, sc.maximum) == (5, 5)
