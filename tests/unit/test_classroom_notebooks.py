"""Issue 45: `course classroom --notebooks` names a folder inside the students' repository. An absolute path, a
`..` part or a control character (a newline would add lines to the workflow's YAML) is refused at once, in
one sentence with exit 2, and nothing is written; before, the files were written and every student's run
then failed on a notebook outside the repository."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from course_cli.main import cli


@pytest.mark.parametrize("bad, says", [("/home/me/lessons", "absolute path"), ("~/lessons", "absolute path"),
                                       ("../elsewhere", "`..`"), ("lessons/../../x", "`..`"),
                                       ("lessons\n  - run: curl evil", "inside the students' repository"),
                                       ("", "inside the students' repository")])
def test_a_notebooks_folder_outside_the_repository_is_refused_at_once(tmp_path, bad, says):
    r = CliRunner().invoke(cli, ["classroom", "lesson01", "--dir", str(tmp_path), "--package", "attention-course",
                                 "--notebooks", bad])
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output and "\n  - run" not in r.output, r.output
    assert not (tmp_path / ".github").exists()  # nothing written


def test_a_folder_inside_the_repository_is_kept_normalised(tmp_path):
    from course_cli.instructor.classroom import notebooks_folder

    assert notebooks_folder("./course/lessons/") == "course/lessons"
    assert notebooks_folder("my..notes") == "my..notes"  # `..` inside a name is a name
    r = CliRunner().invoke(cli, ["classroom", "lesson01", "--dir", str(tmp_path), "--package", "attention-course",
                                 "--notebooks", "./course/lessons/"])
    assert r.exit_code == 0, r.output
    assert "course/lessons/lesson01" in (tmp_path / ".github" / "workflows" / "classroom.yml").read_text()
