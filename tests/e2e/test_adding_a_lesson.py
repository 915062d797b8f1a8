"""docs/adding-a-lesson.md, followed step by step in a temporary copy of the repository: a scratch lesson 11
with one exercise (`attention_entropy`) and one catalogued mistake, written as the document says and in the
files its table names, then checked with the document's own commands.

It proves the document's steps suffice: the files the table names are all a lesson needs (the copy differs from
the repository in those files and no other), the registry finds the lesson, `course check` grades its solution
full and its stub not_implemented in the sandbox, its catalogued mistake is rejected and named, and the
document's test commands pass on it (`pytest -k lessonNN`, the module map, a domain per exercise, and the
registry's slow-tier tests). The lesson's texts are written for this test; nothing of it reaches the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graders.registry import ROOT

DOC = ROOT / "docs" / "adding-a-lesson.md"
LESSON, SLUG, EXERCISE, POINTS = "lesson11", "entropy", "attention_entropy", 2
NOTEBOOK = f"{LESSON}_{SLUG}.ipynb"
# What the copy leaves out: version control, caches and build outputs (the repository's .gitignore).
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".course", "*.egg-info", ".venv",
                              ".ci-venv", ".ci-cache", ".ipynb_checkpoints", "dist", ".hypothesis")

# ----------------------------------------------------------------------------------------------
# The scratch lesson: each constant is one file, or one insertion, of the document's table.

# The solved notebook's cells, in the order the document's "The solved notebook" lists them.
EXERCISE_TEXT = f"""\
### Exercise 1: `{EXERCISE}(weights)` ({POINTS} points)

How spread out is a query's attention? Return one entropy per query, in nats: H = −Σ w·ln w over the
keys, the last axis of `weights`.

- `weights` is `(..., Tq, Tk)`, each row a distribution over the keys (non-negative, summing to 1);
  the result is `(..., Tq)`, in the input's dtype;
- a key with weight exactly 0 adds 0 to the sum (the limit of w·ln w as w goes to 0);
- no `torch.special.entr` and no `torch.xlogy`."""

SOLUTION_CELL = f'''\
def {EXERCISE}(weights: torch.Tensor) -> torch.Tensor:
    """The entropy of each query's weights over the keys (the last axis), in nats."""
    ### BEGIN SOLUTION
    attended = weights > 0  # a masked key has weight exactly 0
    logs = torch.where(attended, weights.log(), torch.zeros_like(weights))
    terms = weights * logs
    return -terms.sum(dim=-1)
    ### END SOLUTION'''


def documented_check_cell() -> str:
    """The check cell's source as the document gives it (for lesson01's softmax), for this lesson's exercise."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("and exactly this source"):].split("```python\n", 1)[1].split("```")[0]
    source = "\n".join(line.strip() for line in block.strip().splitlines())
    return source.replace("lesson01", LESSON).replace("softmax", EXERCISE).replace("(4 points)", f"({POINTS} points)")


def documented_metadata(grade_id: str) -> dict:
    """The nbgrader metadata the document gives for a solution cell (`<exercise>`) or a check cell."""
    for found in re.findall(r'`(\{"grade": [^`]*\})`', DOC.read_text(encoding="utf-8")):
        meta = json.loads(found.replace("<exercise>", EXERCISE).replace("<points>", str(POINTS)))
        if meta["grade_id"] == grade_id:
            return {"nbgrader": meta}
    raise AssertionError(f"docs/adding-a-lesson.md gives no metadata for a cell {grade_id!r}")


SELF_CHECK = """\
## Self-check

<details>
<summary><b>What entropy does a query that attends to one key alone have?</b></summary>

Zero: a single weight of 1 gives 1·ln 1 = 0, and every other key adds nothing.
</details>

<details>
<summary><b>And a query spread evenly over Tk keys?</b></summary>

ln Tk, the largest value any distribution over Tk keys can reach.
</details>

<details>
<summary><b>Why does a masked key need care?</b></summary>

Its weight is exactly 0 and ln 0 is −inf; 0 times −inf is NaN in floating point, though the limit is 0.
</details>"""


def _cell(kind: str, source: str, index: int, metadata: dict | None = None) -> dict:
    cell = {"cell_type": kind, "id": f"scratch-{index}", "metadata": metadata or {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def solved_notebook() -> dict:
    cells = [
        ("markdown", "# Lesson 11 — Attention entropy\n\nA measure of how sharply each query attends: the "
                     "entropy of its weights.", None),
        ("code", "import torch", None),  # setup
        ("markdown", EXERCISE_TEXT, None),
        ("code", SOLUTION_CELL, documented_metadata(EXERCISE)),
        ("code", documented_check_cell(), documented_metadata(f"test_{EXERCISE}")),
        ("markdown", SELF_CHECK, None),
    ]
    return {"cells": [_cell(kind, src, i, meta) for i, (kind, src, meta) in enumerate(cells)],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


MISTAKE_ID = "nan_at_masked"
MISTAKE_MESSAGE = ("a masked key (weight exactly 0) gives 0 · ln 0 = 0 · (−inf) = NaN: count its term as 0, "
                   "the limit of w·ln w.")
MISTAKE_EDIT = ("torch.where(attended, weights.log(), torch.zeros_like(weights))", "weights.log()")

GRADER = f'''\
"""Lesson 11 — attention entropy: `{EXERCISE}`.

A scratch lesson written by tests/e2e/test_adding_a_lesson.py in a temporary copy of the repository.
"""

from __future__ import annotations

import torch

from .engine import CPU, Checks, Mistake, same
from .engine.checks import Arg, Domain
from .engine.compare import close, tolerance
from .engine.probe import relaid

CHECKS = Checks("{LESSON}")

FORBIDDEN = {{"{EXERCISE}": ("torch.special.entr", "torch.xlogy", "torch.special.xlogy", "torch.Tensor.xlogy")}}


def _weights(ctx, *shape, masked=False):
    scores = ctx.randn(*shape, scale=2.0)  # (..., Tq, Tk)
    if masked:
        drop = ctx.bernoulli(*shape, p=0.4)
        drop[..., 0] = False  # every query keeps a key
        scores = scores.masked_fill(drop, float("-inf"))
    return torch.softmax(scores, dim=-1)


@CHECKS.probe("{EXERCISE}", "matches the reference on random weights", same(), CPU,
              rule="Return one entropy per query, in nats")
def entropy_random(ctx):
    return {{"output": ctx.call(ctx.target, _weights(ctx, 2, 3, 5))}}


@CHECKS.probe("{EXERCISE}", "a masked key adds 0", same(), CPU, hidden=True,
              rule="a key with weight exactly 0 adds 0 to the sum")
def entropy_masked(ctx):
    return {{"output": ctx.call(ctx.target, _weights(ctx, 2, 4, 6, masked=True))}}


ENTROPY_DOMAIN = Domain(
    args=(Arg("shape", ("2, 3, 5", "7", "4, 1", "2, 3, 4, 6")), Arg("keys", ("all attended", "some masked"))),
    dtypes=(("weights", ("float32", "float64")),),
    layouts=(("weights", ("contiguous", "transposed", "strided")),), examples=4)


def _domain_judge(s, r, ctx):
    return close(s.get("output"), r["output"], "output", tol=tolerance(r["output"].dtype).scaled(2))


@CHECKS.domain("{EXERCISE}", ENTROPY_DOMAIN, _domain_judge)
def entropy_domain(ctx, ex):
    shape = tuple(int(n) for n in ex["shape"].split(", "))
    weights = _weights(ctx, *shape, masked=ex["keys"] == "some masked")
    weights = relaid(weights.to(getattr(torch, ex["dtype of weights"])), ex["layout of weights"])
    return {{"output": ctx.call(ctx.target, weights)}}


MISTAKES = (
    Mistake("{EXERCISE}", "{MISTAKE_ID}", "{MISTAKE_MESSAGE}",
            edits={{"{MISTAKE_EDIT[0]}": "{MISTAKE_EDIT[1]}"}},
            hint="Print your result for a row with a masked key. What is 0 times ln 0 in floating point?"),
)

CHECKS.add_battery()
'''

REGISTRY_ROW = f'''\
    Lesson(
        "{LESSON}",
        "{SLUG}",
        "Attention entropy",
        exercises=(
            Exercise(
                "{EXERCISE}",
                points={POINTS},
                hints=(
                    "Entropy sums −w·ln w over the keys: the last axis, and that axis disappears from the result.",
                    "A masked key has weight 0, and ln 0 is −inf: decide what its term must be before you "
                    "multiply, and pick the value with a condition on the weight.",
                ),
            ),
        ),
    ),
'''

MAP_ROW = f"| `graders/{LESSON}_{SLUG}.py` | Lesson 11 — attention entropy: `{EXERCISE}`. |"

# "tests beyond the generic ones": a correct alternative is accepted.
LESSON_TEST = f'''\
"""Lesson 11 beyond the generic tests: a correct alternative passes."""

import pytest

from graders.registry import find_lesson
from harness import check_one, explain, with_code

LESSON = find_lesson("{LESSON}")
pytestmark = pytest.mark.{LESSON}

NAN_TO_NUM = """
def {EXERCISE}(weights):
    return -torch.nan_to_num(weights * weights.log()).sum(-1)
"""


def test_nan_to_num_passes(tmp_path):
    res = check_one(LESSON, with_code(LESSON, "{EXERCISE}", NAN_TO_NUM, tmp_path), "{EXERCISE}")
    assert res.status == "passed", explain(res)
'''


def add_the_lesson(repo: Path) -> None:
    """The document's table, row by row, in the copy at `repo` (the derived files come from its commands)."""
    notebook = json.dumps(solved_notebook(), indent=1, ensure_ascii=False) + "\n"
    (repo / "solutions" / NOTEBOOK).write_text(notebook, encoding="utf-8")
    (repo / "graders" / f"{LESSON}_{SLUG}.py").write_text(GRADER, encoding="utf-8")
    registry = repo / "graders" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    start = text.index("LESSONS: tuple[Lesson, ...] = (")
    end = text.index("\n)\n", start) + 1  # the table's closing parenthesis
    registry.write_text(text[:end] + REGISTRY_ROW + text[end:], encoding="utf-8")
    (repo / "tests" / "lessons" / f"test_{LESSON}.py").write_text(LESSON_TEST, encoding="utf-8")
    arch = repo / "docs" / "architecture.md"
    lines = arch.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith("| `graders/lesson"))
    lines.insert(last + 1, MAP_ROW + "\n")
    arch.write_text("".join(lines), encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# The document's own words: its table's paths and its "Checking your work" commands.


def documented_paths() -> set[str]:
    """The files the document's table names, for lesson 11 (`lessonNN`, `<slug>` and `NN` filled in)."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| what | where |"):].split("\n\n")[0]
    paths = set()
    for row in table.splitlines()[2:]:
        where = row.strip("|").rsplit("|", 1)[-1]
        for token in re.findall(r"`([^`\s]+)`", where):
            if "/" in token:
                paths.add(token.replace("lessonNN", LESSON).replace("<slug>", SLUG).replace("NN", LESSON[-2:]))
    return paths


def documented_commands() -> list[str]:
    """The commands of "Checking your work", comments cut, for lesson 11."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("## Checking your work"):].split("```")[1]
    return [line.split("#")[0].strip().replace("lessonNN", LESSON) for line in block.splitlines()
            if line.split("#")[0].strip()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not SKIP(dirpath, [d])]
        for name in filenames:
            if not SKIP(dirpath, [name]):
                path = Path(dirpath, name)
                out[path.relative_to(root).as_posix()] = _digest(path)
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A copy of the repository with lesson 11 added by the document's steps; its environment for commands."""
    base = tmp_path_factory.mktemp("adding-a-lesson")
    repo = base / "course"
    shutil.copytree(ROOT, repo, ignore=SKIP)
    before = _tree(repo)  # the copy as it came, not ROOT: another test writing there cannot blur the comparison
    # the author's own clone is the workspace (no COURSE_WORKSPACE, no `.course/` marker): `course check
    # lessonNN` grades its lessons/ notebook
    env = {**os.environ, "PYTHONPATH": str(repo), "COURSE_CACHE_DIR": str(base / "cache"), "COURSE_WARM": "0"}
    for name in ("COURSE_WORKSPACE", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(name, None)
    add_the_lesson(repo)

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)

    # the derived files, by the document's commands: the student notebook, then the stored verdicts
    for command in documented_commands()[:1] + [_golden_command()]:
        done = run(*_argv(command))
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    after = _tree(repo)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    return repo, run, changed


def _golden_command() -> str:
    """The table's command that writes the lesson's stored verdicts."""
    (command,) = re.findall(r"`(python -m pytest [^`]*--update-golden[^`]*)`", DOC.read_text(encoding="utf-8"))
    return command.replace("lessonNN", LESSON)


def _argv(command: str) -> list[str]:
    """A documented command as this interpreter runs it (`course` is `python -m course_cli` of the copy)."""
    words = command.split()
    if words[0] == "course":
        return [sys.executable, "-m", "course_cli", *words[1:]]
    assert words[:3] == ["python", "-m", "pytest"], command
    return [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *words[3:]]


def test_the_table_names_every_file_a_lesson_needs(scratch):
    """The copy differs from the repository in the table's files and no other; each file the table asks for
    was written (a test of a child, tests/e2e/test_lessonNN_e2e.py, only when one is needed)."""
    _, _, changed = scratch
    documented = documented_paths()
    assert changed - documented == set(), "files a lesson needed that docs/adding-a-lesson.md does not name"
    assert documented - changed == {f"tests/e2e/test_{LESSON}_e2e.py"}


def test_the_registry_finds_the_lesson(scratch):
    _, run, _ = scratch
    done = run(sys.executable, "-m", "course_cli", "list")
    assert done.returncode == 0, done.stderr
    assert LESSON in done.stdout and "Attention entropy" in done.stdout, done.stdout
    done = run(sys.executable, "-m", "course_cli", "hint", LESSON, EXERCISE)  # the registry row's first hint
    assert done.returncode == 0 and "Entropy sums" in done.stdout, (done.stdout, done.stderr)


def _check(run, command: str, *args: str) -> dict:
    """A `course check` command of the document, its result as JSON."""
    assert command in documented_commands(), command
    done = run(*_argv(command), "--json", *args)
    assert done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout)


def test_course_check_grades_the_solution_full(scratch):
    _, run, _ = scratch
    result = _check(run, f"course check {LESSON} --solution")
    assert [(e["id"], e["status"], e["points"]) for e in result["exercises"]] == [(EXERCISE, "passed", POINTS)]
    assert result["score"] == result["max_score"] == POINTS


def test_course_check_grades_the_stub_not_implemented(scratch):
    _, run, _ = scratch
    result = _check(run, f"course check {LESSON}")
    assert [(e["id"], e["status"], e["points"]) for e in result["exercises"]] == [(EXERCISE, "not_implemented", 0)]


def test_the_catalogued_mistake_is_rejected_and_named(scratch, tmp_path):
    repo, run, _ = scratch
    nb = json.loads((repo / "solutions" / NOTEBOOK).read_text(encoding="utf-8"))
    (cell,) = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == EXERCISE]
    old, new = MISTAKE_EDIT
    assert cell["source"].count(old) == 1
    cell["source"] = cell["source"].replace(old, new)
    path = tmp_path / "mistaken.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    (ex,) = _check(run, f"course check {LESSON}", "--notebook", str(path))["exercises"]
    assert (ex["id"], ex["points"]) == (EXERCISE, 0) and ex["status"] in ("failed", "error"), ex
    assert ex["diagnosis"] == MISTAKE_MESSAGE, ex


# The block's commands this test leaves to CI's own runs: both tiers of the lesson (sandboxed gradings of it
# and its mistake, nbgrader, the warm grader: minutes) and the whole fast tier. Of the first it runs the
# registry's tests below; `course check` above graded the solution, stub and mistake in the sandbox.
NOT_RUN = {f"python -m pytest -q tests -m {LESSON}", "python -m pytest -q -n 2"}
REGISTRY_TESTS = [f"tests/e2e/test_lessons_e2e.py::{name}[{LESSON}]" for name in
                  ("test_registry_matches_the_files", "test_nbgrader_points_of_every_check_cell_equal_the_registry")]


def test_the_documented_test_commands_pass(scratch):
    """Every pytest command of "Checking your work" passes on the scratch lesson (those of NOT_RUN aside, for
    which the registry's slow-tier tests run), and `-k lessonNN` selects the lesson's own tests."""
    _, run, _ = scratch
    commands = [c for c in documented_commands() if c.startswith("python -m pytest")]
    assert NOT_RUN <= set(commands), commands
    ran = {}
    for command in [c for c in commands if c not in NOT_RUN]:
        # the registry's tests ride with the command that names test files (one interpreter start fewer)
        extra = REGISTRY_TESTS if "-k" not in command.split() else []
        done = run(*_argv(command), *extra, "-rA")
        assert done.returncode == 0, (command, done.stdout[-4000:], done.stderr[-2000:])
        ran[command] = done.stdout
    assert len(ran) == 2, ran.keys()

    def passed(name: str, out: str) -> bool:
        return re.search(r"^PASSED \S*" + re.escape(name) + "$", out, re.M) is not None

    selected = ran[f"python -m pytest -q tests -k {LESSON}"]
    for name in (f"test_solution_passes_in_process[{LESSON}]",
                 f"test_student_stub_is_not_implemented_in_process[{LESSON}]",
                 f"test_known_mistake_is_rejected_and_named_in_process[{LESSON}-{MISTAKE_ID}]",
                 f"test_verdicts_unchanged[{LESSON}]", "test_nan_to_num_passes"):
        assert passed(name, selected), (name, selected[-3000:])
    for name in [*REGISTRY_TESTS, "test_every_exercise_declares_its_domain",
                 "test_each_row_says_what_its_docstring_says"]:
        assert any(passed(name.split("::")[-1], out) for out in ran.values()), name
