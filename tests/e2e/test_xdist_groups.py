"""The tests of a module that share a module-scoped fixture run on one xdist worker (tests/conftest.py
`_grouped` and `pytest_xdist_make_scheduler`), so an expensive fixture (a graded corpus, a server, an installed
venv) is made once per run. Run with `-n 2` or more, as the README's command does: the fixture leaves a file
named after its worker in a folder every worker of the run sees, and a test that finds two fails (the second
worker to make it fails at least)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker else base) / "xdist-groups-made"
    folder.mkdir(exist_ok=True)
    (folder / str(worker)).touch()
    return folder


@pytest.mark.parametrize("i", range(8))
def test_a_module_fixture_is_made_once_per_run(made, i):
    assert [p.name for p in made.iterdir()] == [str(os.environ.get("PYTEST_XDIST_WORKER"))]
