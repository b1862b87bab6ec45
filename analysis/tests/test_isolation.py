"""isolation.kill_as refuses any uid that is not one of the grader's slots: issued as root, or
as a person's uid, kill(-1, SIGKILL) would end everything of theirs on the machine."""

import pytest

from analysis.grade import isolation


@pytest.mark.parametrize("uid", [0, 1000, 65534, isolation.UID_BASE - 1,
                                 isolation.UID_BASE + 2 * isolation.SLOTS])
def test_kill_as_refuses_a_uid_outside_the_slots(uid):
    with pytest.raises(ValueError, match="is not one of the grader's"):
        isolation.kill_as(uid)
