"""The versions of Lab 2 (analysis/grade/labs.py): each one record, told apart from what a
submission built and its own common.h, or named with --lab (a year names its version, the
2017 lab is refused with one line)."""

import pytest

from analysis.grade import design as D
from analysis.grade import labs

KIT_2019 = b"#define ART_DELAY 10\nvoid getContent(char *dst, int pos) { usleep(ART_DELAY); }\n"
KIT_2018 = b"void getContent(char *dst, int pos) { strcpy(dst, theArray[pos]); }\n"


def test_four_servers_are_the_2019_2023_lab_whatever_else_was_built():
    lab, why = labs.detect(["main1", "main2", "main", "main4"], KIT_2018)
    assert lab.name == "2019-2023" and "main1, main2, main4 built" in why
    assert lab.servers == labs.FOUR and lab.speed
    assert lab.designs["main3"] == (D.ONE_RWLOCK,)


def test_one_server_main_is_the_2024_lab_or_2018_by_its_common_h():
    lab, why = labs.detect(["main"], KIT_2019)
    assert lab.name == "2024+" and lab.servers == ("main",) and "2024+" in why
    assert set(lab.designs["main"]) == set(D.EXPECTED.values()) and not lab.speed
    assert labs.detect(["main"], None)[0].name == "2024+"  # no common.h: the kit of today
    old, why = labs.detect(["main"], KIT_2018)
    assert old.name == "2018" and old.timing == "sum" and not old.delay and "2018" in why


def test_main_built_first_by_a_makefile_of_four_servers_is_the_four_server_lab():
    # `main: ...` first, `all: main main2 main3 main4`: main is main1 (--layout main1=main)
    makefile = b"main: main.c\n\tcc -o main main.c\nall: main main2 main3 main4\n"
    lab, why = labs.detect(["main"], KIT_2019, makefile)
    assert lab.name == "2019-2023" and "names main1..main4" in why
    assert labs.detect(["main"], KIT_2019, b"main: server.c\n\tcc -o main server.c\n")[0] \
        .name == "2024+"


def test_main_on_the_2018_kit_stays_2018_beside_extra_targets_and_says_when_pieces_disagree():
    # the 2018 lab's Makefiles sometimes built main1..main3 as extra targets
    extra = b"main: server.c\n\tcc -o main server.c\nmore: main1 main2 main3\n"
    lab, why = labs.detect(["main"], KIT_2018, extra)
    assert lab.name == "2018" and "extra targets main1, main2, main3 are not graded" in why
    four = b"all: main main2 main3 main4\n"
    lab, why = labs.detect(["main"], KIT_2018, four)
    assert lab.name == "2018" and "the pieces disagree" in why and "--lab" in why


def test_nothing_built_is_graded_as_the_default_lab_and_says_so():
    lab, why = labs.detect([], None)
    assert lab.name == labs.DEFAULT and "neither" in why


@pytest.mark.parametrize("name, want", [("2019-2023", "2019-2023"), ("2021", "2019-2023"),
                                        ("2024+", "2024+"), ("2026", "2024+"),
                                        ("2018", "2018")])
def test_a_version_or_a_year_names_a_lab(name, want):
    assert labs.by_name(name).name == want


@pytest.mark.parametrize("name", ["2017", "1999", "", "main"])
def test_the_2017_lab_and_unknown_names_are_refused_with_one_line(name):
    with pytest.raises(ValueError) as e:
        labs.by_name(name)
    assert "\n" not in str(e.value)
    if name == "2017":
        assert "no kit protocol" in str(e.value)


def test_a_build_failure_is_not_charged_on_a_platform_for_either_lab():
    from analysis.grade import hosted
    for servers in (["main1", "main2", "main3", "main4"], ["main"]):
        ev = {"lab": {"servers": servers},
              "checks": [{"id": "build", "status": "fail", "evidence": []},
                         {"id": "binaries", "status": "fail",
                          "evidence": [f"missing: {', '.join(servers)}"]}]}
        assert hosted.build_failed(ev), servers
        ev["checks"][1]["evidence"] = ["missing: main2"]
        assert not hosted.build_failed(ev)
