"""Issue 45: a submission filed under a local user's id is taken as theirs only when that user (or the grading
user) owns it. The accounts are the system's own (`nobody` claims, `daemon` plants), so no user is created
here; root makes the files theirs (chown). Through the real exchange with two users created by the test:
tests/e2e/test_nbgrader_classmate_id.py."""

from __future__ import annotations

import os
import pwd

import nbformat
import pytest

from course_cli.instructor.nbgrader_course import _check_arrived, arrived_owner_refusal, claimed_owners
from course_cli.instructor.nbgrader_exchange import copy_submission
from graders.registry import LESSONS

L = LESSONS[0]


def _uid(name):
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        pytest.skip(f"no local account {name!r}")


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to other users needs root")


def test_an_inbound_folder_made_by_another_user_is_not_collected_as_the_claimed_student_s(tmp_path):
    claimed, planter = _uid("nobody"), _uid("daemon")
    forged = tmp_path / "inbound" / "nobody+lesson01+2026-01-01 00:00:00.000000 UTC+abc"
    forged.mkdir(parents=True)
    (forged / L.notebook).write_text("{}")
    os.chown(forged, planter, -1)
    owners, why = claimed_owners(forged, "nobody")
    assert owners == {claimed, os.geteuid()} and why is not None and "owned by daemon" in why
    os.chown(forged, claimed, -1)
    assert claimed_owners(forged, "nobody")[1] is None
    os.chown(forged / L.notebook, planter, -1)  # a file of another user's inside the student's own folder
    refused = copy_submission(forged, tmp_path / "submitted" / "nobody" / "lesson01", owners=owners)
    assert refused == [f"{L.notebook} (owned by uid {planter}, not by the student it was submitted as)"]
    assert claimed_owners(forged, "no-such-account-here") == (None, None)  # ids of another authenticator


def test_autograde_refuses_a_notebook_of_another_user_filed_under_a_student_s_id(tmp_path):
    claimed, planter = _uid("nobody"), _uid("daemon")
    folder = tmp_path / "course" / "submitted" / "nobody" / L.id
    folder.mkdir(parents=True)
    nb = folder / L.notebook
    nb.write_bytes(L.solution_path.read_bytes())  # the solved notebook, planted for `nobody` by `daemon`
    os.chown(nb, planter, -1)
    _check_arrived([str(nb)])
    stand_in = nbformat.read(nb, as_version=4)
    why = stand_in.metadata["course"]["refused"]
    assert "owned by daemon, not by nobody" in why and "refused/nobody/lesson01" in why, why
    assert (tmp_path / "course" / "refused" / "nobody" / L.id / L.notebook).read_bytes() == \
        L.solution_path.read_bytes()  # set aside as it came
    os.chown(nb, claimed, -1)  # the student's own, or the grading user's: not refused for its owner
    assert arrived_owner_refusal(nb, "nobody") is None
    os.chown(nb, os.geteuid(), -1)
    assert arrived_owner_refusal(nb, "nobody") is None
    os.chown(nb, planter, -1)
    assert arrived_owner_refusal(nb, "no-such-account-here") is None  # ids of another authenticator
