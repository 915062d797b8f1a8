"""One story in the docs (issue 47 item 8): the Gradescope base image the CLI names is the one the README and
setup.sh name, and the zip's size the README states is the size `course gradescope` writes."""

from __future__ import annotations

import re
import zipfile

from click.testing import CliRunner

from course_cli.instructor.gradescope import SETUP
from course_cli.main import cli
from graders.registry import ROOT

UBUNTU = re.compile(r"Ubuntu (\d\d\.\d\d)")


def test_the_base_image_is_one_version_everywhere(tmp_path):
    r = CliRunner().invoke(cli, ["gradescope", "lesson01", "--out", str(tmp_path / "a.zip")], catch_exceptions=False)
    cli_says = set(UBUNTU.findall(r.output)) | set(UBUNTU.findall(cli.commands["gradescope"].help.split("\n\n")[0]))
    readme = (ROOT / "README.md").read_text()
    default = re.search(r"keep the default \*\*Ubuntu (\d\d\.\d\d)\*\* base image", readme)
    setup = re.search(r"the base image Gradescope\s*#?\s*documents: Ubuntu (\d\d\.\d\d)", SETUP)
    assert default and setup and cli_says == {default.group(1)} == {setup.group(1)}, (cli_says, default, setup)
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        assert "setup.sh" in z.namelist()


def test_the_zip_size_the_readme_states_is_measured(tmp_path):
    CliRunner().invoke(cli, ["gradescope", "lesson01", "--out", str(tmp_path / "a.zip")], catch_exceptions=False)
    size = (tmp_path / "a.zip").stat().st_size
    stated = re.search(r"the zip itself is ([\d.]+) MB \(([\d,]+) bytes for lesson01", (ROOT / "README.md").read_text())
    assert stated, "the README states the zip's size"
    assert abs(float(stated.group(1)) - size / 1e6) < 0.05, (stated.group(0), size)
    assert abs(int(stated.group(2).replace(",", "")) - size) <= 0.05 * size, (stated.group(0), size)
