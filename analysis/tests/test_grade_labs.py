"""The versions of Lab 2 (analysis/grade/labs.py): each one record, told apart from what a
submission built and its own common.h, or named with --lab (a year names its version, the
2017 lab is refused with one line)."""

import pytest

from analysis.grade import labs
from analysis.grade.measure import design as D

KIT_2019 = b"#define ART_DELAY 10\nvoid getContent(char *dst, int pos) { usleep(ART_DELAY); }\n"
KIT_2018 = b"void getContent(char *dst, int pos) { strcpy(dst, theArray[pos]); }\n"


def test_four_servers_are_the_2019_2023_lab_whatever_else_was_built():
    lab, why = labs.detect(["main1", "main2", "main", "main4"], KIT_2019)
    assert lab.name == "2019-2023" and "main1, main2, main4 built" in why
    assert lab.servers == labs.FOUR and lab.speed and lab.delay and lab.timing == "mean"
    assert lab.designs["main3"] == (D.ONE_RWLOCK,)


def test_the_kit_is_an_axis_of_its_own_told_by_the_submissions_common_h():
    # four servers on the older kit: no delay to time, lines that are sums; said once
    lab, why = labs.detect(list(labs.FOUR), KIT_2018)
    assert lab.servers == labs.FOUR and not lab.delay and lab.timing == "sum"
    assert "older kit" in lab.what and why.count("older kit") == 1
    # a course's --lab names the servers; the kit is still the submission's
    old, kit = labs.on_kit(labs.by_name("2024+"), KIT_2018)
    assert old.servers == ("main",) and not old.delay and "older kit" in kit
    assert labs.on_kit(labs.by_name("2019-2023"), KIT_2019) == (labs.by_name("2019-2023"), "")
    assert labs.on_kit(labs.by_name("2019-2023"), None)[0].delay  # no common.h: today's kit


def test_one_server_main_is_the_2024_lab_or_2018_by_its_common_h():
    lab, why = labs.detect(["main"], KIT_2019)
    assert lab.name == "2024+" and lab.servers == ("main",) and why == "main built alone"
    assert set(lab.designs["main"]) == set(D.EXPECTED.values()) and not lab.speed
    none, why = labs.detect(["main"], None)
    assert none.name == "2024+" and "no common.h" in why
    old, why = labs.detect(["main"], KIT_2018)
    assert old.name == "2018" and old.timing == "sum" and not old.delay and "usleep" in why


def test_main_beside_targets_main2_to_main4_is_the_one_mutex_main1():
    makefile = b"main: server.c\n\tcc -o main server.c\nmore: main2 main3 main4\n"
    for kit in (KIT_2018, KIT_2019):
        lab, why = labs.detect(["main"], kit, makefile)
        assert lab.servers == labs.FOUR and lab.place == (("main1", "main"),), why
        assert "main is main1" in why and not lab.extras
        assert lab.delay == (kit is KIT_2019)


@pytest.mark.parametrize("built, makefile", [
    (["main"], b"main: server.c\n\tcc -o main server.c\nmore: main1 main2 main3\n"),
    (["main", "main1", "main2", "main3"], b"all: main main1 main2 main3\n")])
def test_main_with_main1_to_main3_is_the_one_server_lab_and_its_extras(built, makefile):
    # 2018-2020: `main` the best design, main1..main3 the others in the student's order:
    # main is graded as the one-server lab of its kit, the extras never against main1..main4
    for kit, name in ((KIT_2018, "2018"), (KIT_2019, "2024+"), (None, "2024+")):
        lab, why = labs.detect(built, kit, makefile)
        assert lab.name == name and lab.servers == ("main",) and not lab.place, why
        assert lab.extras == ("main1", "main2", "main3") and "extra targets" in lab.what
        assert "main1, main2 and main3 beside it" in why and "no main4" in why
        assert set(lab.designs["main"]) == set(labs.ANY_DESIGN)
    # main4 among them: the four-server numbering again
    assert labs.detect([*built, "main4"], KIT_2019, makefile)[0].name == "2019-2023"


SERVER_2017 = b"int main(int c, char **argv) { int port = atoi(argv[1]); int n = atoi(argv[2]); }"


def test_a_server_and_client_of_its_own_is_the_2017_lab_not_gradable_by_the_kit():
    lab, why = labs.own_protocol(["server", "client"], None, SERVER_2017)
    assert lab is labs.OWN and lab.gradable and lab.servers == () and "NOT" in labs.NOT_GRADABLE
    assert "port first" in why and "`server <port> <n>`" in why and "common.h is not" in why
    kit_h = b"#define COM_BUFF_SIZE 100\n"
    assert labs.own_protocol(["server", "client"], kit_h, SERVER_2017)[0] is labs.OWN
    # the kit's command line and common.h, or a main beside them: not the 2017 lab
    kit_cmd = b"int port = atoi(argv[3]);"
    assert labs.own_protocol(["server", "client"], kit_h, kit_cmd) == (None, "")
    assert labs.own_protocol(["server", "client", "main"], None, SERVER_2017) == (None, "")
    assert labs.own_protocol(["server"], None, SERVER_2017) == (None, "")
    for src in (b"serv.sin_port = htons(atoi(argv[1]));", b"port_no = (short)atoi(argv[1]);"):
        assert labs.own_protocol(["server", "client"], kit_h, src)[0] is labs.OWN, src


def test_main_built_first_by_a_makefile_of_four_servers_is_the_four_server_lab():
    # `main: ...` first, `all: main main2 main3 main4`: main is main1
    makefile = b"main: main.c\n\tcc -o main main.c\nall: main main2 main3 main4\n"
    lab, why = labs.detect(["main"], KIT_2019, makefile)
    assert lab.name == "2019-2023" and lab.place == (("main1", "main"),), why
    assert labs.detect(["main"], KIT_2019, b"main: server.c\n\tcc -o main server.c\n")[0] \
        .name == "2024+"


def test_targets_that_place_nothing_leave_one_server_and_name_the_layout_that_would():
    lab, why = labs.detect(["main"], KIT_2018, b"main: s.c\nx: main2 main3\n")
    assert lab.name == "2018" and "--layout main1=NAME,main4=NAME" in why


def test_a_layout_of_main_n_asks_for_the_four_servers_in_every_version():
    for kit in (KIT_2018, KIT_2019, None):
        lab, why = labs.detect(["main"], kit, None, {"main1": "main"})
        assert lab.servers == labs.FOUR and "--layout places main1" in why


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
    from analysis.grade.platforms import hosted
    for servers in (["main1", "main2", "main3", "main4"], ["main"]):
        ev = {"lab": {"servers": servers},
              "checks": [{"id": "build", "status": "fail", "evidence": []},
                         {"id": "binaries", "status": "fail",
                          "evidence": [f"missing: {', '.join(servers)}"]}]}
        assert hosted.build_failed(ev), servers
        ev["checks"][1]["evidence"] = ["missing: main2"]
        assert not hosted.build_failed(ev)


def test_the_lab_options_help_names_every_version_the_table_has():
    """--lab's help is read from labs.LABS: a version added there is offered in --help."""
    from analysis.grade import cli
    act = next(a for a in cli.build_parser()._actions if "--lab" in a.option_strings)
    assert all(f"{name}: {lab.what}" in act.help for name, lab in labs.LABS.items()), act.help
