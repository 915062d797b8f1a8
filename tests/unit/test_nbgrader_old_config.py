"""Issue 45: a course made by `course nbgrader` before its config set `ExchangeFactory.collect` keeps nbgrader's
own collect, which follows links in submissions (a link to source/ is collected as the solved notebook).
Re-running `course nbgrader` adds the setting to that config, the file before kept as `.bak`, and says so;
a config that sets another collect, or that is a link, is left as it is with a warning. Each assertion on
the old course failed before (the config was only "kept")."""

from __future__ import annotations

import os

from click.testing import CliRunner
from traitlets.config.loader import PyFileConfigLoader

from course_cli.instructor.nbgrader_course import CONFIG
from course_cli.main import cli

OURS = "course_cli.instructor.nbgrader_exchange.CourseExchangeCollect"


def _collect_of(config):
    """What nbgrader would load for ExchangeFactory.collect (the config run as nbgrader runs it)."""
    cfg = PyFileConfigLoader(config.name, path=str(config.parent)).load_config()
    return cfg.ExchangeFactory.get("collect")


def _old_course(tmp_path, text=None):
    course = tmp_path / "course"
    course.mkdir()
    new = CONFIG.format(course_id="attention-course")
    old = new[:new.index("# `nbgrader collect`")] if text is None else text  # the config before that setting
    assert "ExchangeFactory" not in old or text is not None
    (course / "nbgrader_config.py").write_text(old)
    return course, old


def test_an_old_config_gets_the_link_refusing_collect_with_a_backup(tmp_path):
    course, old = _old_course(tmp_path)
    assert _collect_of(course / "nbgrader_config.py") is None  # nbgrader's own collect: follows links
    r = CliRunner().invoke(cli, ["nbgrader", str(course), "--no-pack"])
    assert r.exit_code == 0, r.output
    assert _collect_of(course / "nbgrader_config.py") == OURS
    assert (course / "nbgrader_config.py.bak").read_text() == old
    assert "added  to nbgrader_config.py: ExchangeFactory.collect" in r.output
    r = CliRunner().invoke(cli, ["nbgrader", str(course), "--no-pack"])  # again: nothing more to add
    assert r.exit_code == 0 and "kept   nbgrader_config.py" in r.output, r.output
    assert (course / "nbgrader_config.py").read_text().count("ExchangeFactory.collect =") == 1


def test_another_collect_or_a_link_is_left_alone_with_a_warning(tmp_path):
    mine = 'c = get_config()  # noqa\nc.ExchangeFactory.collect = "my.Collect"  # mine\n'
    course, old = _old_course(tmp_path, mine)
    r = CliRunner().invoke(cli, ["nbgrader", str(course), "--no-pack"])
    assert r.exit_code == 0, r.output
    assert (course / "nbgrader_config.py").read_text() == mine and not (course / "nbgrader_config.py.bak").exists()
    assert 'sets ExchangeFactory.collect = "my.Collect", not the course\'s CourseExchangeCollect' in r.stderr
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("c = get_config()  # noqa\n")
    os.unlink(course / "nbgrader_config.py")
    (course / "nbgrader_config.py").symlink_to(elsewhere)
    r = CliRunner().invoke(cli, ["nbgrader", str(course), "--no-pack"])
    assert r.exit_code == 0 and "symbolic link" in r.stderr, r.stderr
    assert elsewhere.read_text() == "c = get_config()  # noqa\n"
