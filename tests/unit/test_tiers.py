"""The tiers are folders (tests/conftest.py): a tier's run does not collect the other tier's folder, and every
way of asking for more (`--all-tiers`, a `-m` of one's own, a folder or file named) still collects it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import conftest

TESTS = Path(conftest.__file__).parent
UNIT, LESSONS, E2E = TESTS / "unit", TESTS / "lessons", TESTS / "e2e"


def _config(*args: str, markexpr: str = "", all_tiers: bool = False, cwd: Path = TESTS.parent):
    options = {"--all-tiers": all_tiers, "markexpr": markexpr}
    return SimpleNamespace(args=list(args), invocation_params=SimpleNamespace(dir=cwd),
                           getoption=lambda name: options[name])


def _collected(config) -> set[str]:
    return {p.name for p in (UNIT, LESSONS, E2E) if not conftest.pytest_ignore_collect(p, config)}


def test_the_fast_tier_does_not_collect_e2e():
    assert _collected(_config("tests")) == {"unit", "lessons"}
    assert _collected(_config(str(TESTS), cwd=Path("/"))) == {"unit", "lessons"}
    assert _collected(_config("tests", markexpr="not slow and lesson03")) == {"unit", "lessons", "e2e"}


def test_the_slow_tier_collects_only_e2e():
    assert _collected(_config("tests", markexpr="slow")) == {"e2e"}
    assert _collected(_config("tests", markexpr=" slow ")) == {"e2e"}


def test_asking_for_more_collects_every_folder_asked_for():
    assert _collected(_config("tests", all_tiers=True)) == {"unit", "lessons", "e2e"}
    assert _collected(_config("tests", markexpr="lesson03")) == {"unit", "lessons", "e2e"}
    named = _collected(_config("tests/e2e/test_gpu.py::test_x", "tests/unit"))
    assert "e2e" in named and "unit" in named
    assert "unit" in _collected(_config("unit/test_tiers.py", markexpr="slow", cwd=TESTS))


def test_only_the_three_tier_folders_are_ever_ignored():
    config = _config("tests")
    assert conftest.pytest_ignore_collect(E2E / "test_gpu.py", config) is None
    assert conftest.pytest_ignore_collect(TESTS / "fixtures", config) is None
