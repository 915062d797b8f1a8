"""Issue 45: a submission file with more than one name (a hard link) that reaches a file the student could not
read is refused like a symbolic link, in every seat's read of a submission (notebook.submission_bytes) and in
nbgrader's collect (nbgrader_exchange.copy_submission). The student is the owner of the folder holding the
file; the test makes that folder another user's (root can: chown), hard-links the instructor's private solved
notebook into it, and asserts the grader's read refuses it; before, its bytes were read with the grader's
rights and graded as the student's. A hard link to the student's own file, or to one anybody can read, is
still read."""

from __future__ import annotations

import os

import pytest

from course_cli.instructor.nbgrader_exchange import copy_submission
from course_cli.sandboxed.notebook import SubmissionRefused, submission_bytes
from graders.registry import LESSONS

L = LESSONS[0]
STUDENT = 54321  # a uid with no account: the folder's owner, as a student's inbound folder is theirs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")


def _seat(tmp_path, mode=0o600, uid=0):
    """The instructor's solved notebook (`uid`'s, `mode`) and a student's folder holding a hard link to it."""
    source = tmp_path / "source"
    source.mkdir()
    solved = source / L.notebook
    solved.write_bytes(L.solution_path.read_bytes())
    os.chown(solved, uid, -1)
    solved.chmod(mode)
    sub = tmp_path / "inbound" / "ana+lesson01"
    sub.mkdir(parents=True)
    os.chown(sub, STUDENT, -1)
    os.link(solved, sub / L.notebook)
    return solved, sub


def test_a_hard_link_to_the_instructor_s_private_notebook_is_not_read(tmp_path):
    solved, sub = _seat(tmp_path)
    with pytest.raises(SubmissionRefused, match=r"hard link \(2 names\) to a file of uid 0, mode 600"):
        submission_bytes(sub / L.notebook, sub)
    dest = tmp_path / "submitted" / "ana" / "lesson01"
    refused = copy_submission(sub, dest)
    assert refused == [f"{L.notebook} (a hard link (2 names) to a file of uid 0, mode 600, that the folder's "
                       f"owner (uid {STUDENT}) cannot read)"]
    assert not (dest / L.notebook).exists()  # nothing of it copied


@pytest.mark.parametrize("mode, uid", [(0o600, STUDENT), (0o644, 0)])
def test_a_hard_link_the_student_could_read_is_their_own_to_submit(tmp_path, mode, uid):
    solved, sub = _seat(tmp_path, mode, uid)
    assert submission_bytes(sub / L.notebook, sub) == solved.read_bytes()
    dest = tmp_path / "submitted" / "ana" / "lesson01"
    assert copy_submission(sub, dest) == [] and (dest / L.notebook).read_bytes() == solved.read_bytes()
