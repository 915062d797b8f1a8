"""`course gradescope LESSON`: a Gradescope autograder for one lesson, and what it runs for each submission.

The zip holds Gradescope's two scripts at its root and the course beside them (`course/`: the graders, the solved
notebooks the reference comes from, the pinned versions). `setup.sh` installs the course's pinned environment and
bubblewrap once, when Gradescope builds the image; `run_autograder` grades the submitted notebook exactly as
`course grade` grades one student (sandboxed child, reference computed afresh) and writes
`results/results.json` in Gradescope's format:

- one test per exercise, visible: the course's points for it (the same as `course check`), and as output the
  course's feedback on its public checks;
- one test per exercise with hidden checks, `after_published`, no points of its own: how many hidden checks
  passed, numbered, without their names, messages or inputs;
- the top-level `score`, the sum of the exercises' points.

The root (`/autograder` on Gradescope) comes from `--root` or `AUTOGRADER_ROOT`, so a test runs the real
`run_autograder` in a temporary tree laid out as Gradescope lays it out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile
from pathlib import Path

from graders.registry import ROOT, Lesson, find_lesson
from graders.engine.results import LessonResult

MARKER = "course/.gradescope-autograder"  # inside the zip: this file says the zip is ours

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Choose the Ubuntu 24.04 base
# image (Python 3.12): the course's pinned versions need Python >= 3.11.
set -euxo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap: every process that runs a submission's code is sandboxed with it
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the course needs Python >= 3.11: choose the Ubuntu 24.04 base image")'
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
# the course's pinned environment (constraints.txt), with torch's CPU build: Gradescope has no GPU
/autograder/venv/bin/pip install -c /autograder/source/course/constraints.txt \\
    --extra-index-url https://download.pytorch.org/whl/cpu "/autograder/source/course{extra}"
/autograder/venv/bin/python -c 'import course_cli.instructor.gradescope, graders.{module}; print("the course is installed")'
# a smoke child: the build fails here, with the fix, when the sandbox cannot start (rather than every student
# scoring 0): e.g. the image lacks user namespaces
cd /autograder/source/course && /autograder/venv/bin/python -m course_cli.sandboxed.sandbox smoke || {{
    echo "the course's sandbox (bubblewrap) cannot start in this image; see the message above" >&2; exit 1; }}
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, from /autograder. It grades the submitted notebook of {lesson}
# with the course's sandbox and writes /autograder/results/results.json.
# AUTOGRADER_ROOT and COURSE_PYTHON move the root and the interpreter (the course's tests use them).
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{COURSE_PYTHON:-$ROOT/venv/bin/python}}"
mkdir -p "$ROOT/results"
cd "$ROOT/source/course" || exit 1
exec "$PYTHON" -m course_cli.instructor.gradescope run --lesson {lesson} --root "$ROOT"
"""

# what of the course goes into the zip, relative to the course's root
INCLUDE = ["pyproject.toml", "constraints.txt", "README.md", "graders/*.py", "graders/engine/*.py", "graders/*.md", "graders/data/*",
           "course_cli/*.py", "course_cli/*/*.py", "solutions/*.ipynb", "lessons/*.ipynb"]


def course_files(root: Path = ROOT) -> list[Path]:
    files = set()
    for pattern in INCLUDE:
        files |= {p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts}
    return sorted(files)


def build_zip(lesson: Lesson, out: Path) -> list[str]:
    """Write the autograder zip; returns its members. A file at `out` that is not such a zip is kept as .bak."""
    out = Path(out)
    if out.exists():
        try:
            ours = MARKER in zipfile.ZipFile(out).namelist()
        except (zipfile.BadZipFile, OSError):
            ours = False
        if not ours:
            out.replace(out.with_name(out.name + ".bak"))
    names = []
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            names.append(name)

        extra = "[triton]" if lesson.triton else ""
        add("setup.sh", SETUP.format(extra=extra, module=f"{lesson.id}_{lesson.slug}").encode(), 0o755)
        add("run_autograder", RUN.format(lesson=lesson.id).encode(), 0o755)
        for p in course_files():
            add("course/" + p.relative_to(ROOT).as_posix(), p.read_bytes())
        add(MARKER, f"{lesson.id}\n".encode())
    tmp.replace(out)
    return names


# ----------------------------------------------------------------------------------------------
# Inside Gradescope: one submission


def find_submission(folder: Path, lesson: Lesson) -> tuple[Path | None, str]:
    """The notebook to grade under `folder`, and a note: the lesson's notebook by name, else the only notebook;
    None (and why) when there is none or several."""
    found = sorted(p for p in Path(folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in found if p.name == lesson.notebook]
    if named:
        return named[0], ""
    if len(found) == 1:
        return found[0], f"graded {found[0].name} (the only notebook submitted; expected {lesson.notebook})"
    if not found:
        return None, f"no notebook was submitted: upload {lesson.notebook}"
    names = ", ".join(p.name for p in found)
    return None, f"{len(found)} notebooks were submitted ({names}) and none is {lesson.notebook}: submit that one"


def hidden_names(lesson: Lesson) -> dict[str, set[str]]:
    """Per exercise, the names of its hidden checks (those that no public check of the exercise shares)."""
    import importlib

    checks = importlib.import_module(lesson.module).CHECKS
    out = {}
    for ex in lesson.exercises:
        public = {c.name for c in checks.of(ex.name) if not c.hidden}
        out[ex.name] = {c.name for c in checks.of(ex.name) if c.hidden} - public
    return out


_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱", "not_implemented": "·", "skipped": "–"}


def _feedback(ex, hidden: set[str], n_hidden: int) -> str:
    lines = [f"{ex.status.replace('_', ' ')}: {ex.points:g}/{ex.max_points:g} points"]
    if ex.diagnosis:
        lines.append(f"Likely mistake: {ex.diagnosis}")
    public = [c for c in ex.checks if c.name not in hidden]
    if public:
        lines.append("Checks:")
    for c in public:
        where = f" [{c.device}/{c.dtype}]"
        if c.status == "skipped":
            continue
        if c.status == "passed":
            lines.append(f"  {_MARK['passed']} {c.name}{where}")
        else:
            lines.append(f"  {_MARK.get(c.status, '?')} {c.name}{where}: {c.status.replace('_', ' ')}"
                         + (f"\n      " + c.message.replace("\n", "\n      ") if c.message else ""))
    skipped = sum(c.status == "skipped" for c in public)
    if skipped:
        lines.append(f"  {_MARK['skipped']} {skipped} GPU check run(s) skipped: no GPU here (skipped is not passed)")
    if n_hidden:
        lines.append(f"{n_hidden} hidden check(s) of this exercise count too; their results are shown when the "
                     "grades are published.")
    return "\n".join(lines)


def gradescope_results(lesson: Lesson, result: LessonResult, hidden: dict[str, set[str]], note: str = "",
                       seconds: float | None = None) -> dict:
    """Gradescope's results.json for one graded submission: points as `course check` gives them."""
    tests = []
    for ex in result.exercises:
        h = hidden.get(ex.id, set())
        h_checks = [c for c in ex.checks if c.name in h]
        n_hidden = len({c.name for c in h_checks}) if h_checks else len(h)
        tests.append({"name": ex.id, "score": ex.points, "max_score": ex.max_points,
                      "status": "passed" if ex.status == "passed" else "failed",
                      "output": _feedback(ex, h, n_hidden), "visibility": "visible"})
        if h:
            counted = [c for c in h_checks if c.status != "skipped"]
            if counted:
                ok = sum(c.status == "passed" for c in counted)
                lines = [f"{ok} of {len(counted)} hidden check runs passed."]
                lines += [f"  hidden check {i + 1}: {c.status.replace('_', ' ')}" for i, c in enumerate(counted)]
                status = "passed" if ok == len(counted) else "failed"
            else:
                lines, status = [f"the hidden checks did not run ({ex.status.replace('_', ' ')}: see {ex.id})"], "failed"
            tests.append({"name": f"{ex.id}: hidden checks", "status": status, "output": "\n".join(lines),
                          "visibility": "after_published"})
    head = f"{lesson.id} ({lesson.title}): {result.score:g}/{result.max_score:g} points."
    if note:
        head += f"\n{note}"
    if any(ex.status != "passed" for ex in result.exercises):
        head += ("\nAn exercise scores its points when every check passes, hidden ones included; run "
                 f"`course check {lesson.id}` on your own machine for the full story.")
    data = {"score": result.score, "output": head, "visibility": "visible", "stdout_visibility": "hidden",
            "tests": tests, "extra_data": {"lesson": lesson.id, "max_score": result.max_score}}
    if seconds is not None:
        data["execution_time"] = round(seconds, 1)
    return data


def run(lesson: Lesson, root: Path) -> dict:
    """Grade `root`/submission's notebook, write `root`/results/results.json; returns what was written."""
    from course_cli.classes.batch import grade_submission
    from course_cli.sandboxed.grading import _error_result

    t0 = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    path, note = find_submission(root / "submission", lesson)
    if path is None:
        result = _error_result(lesson, "", note)
    else:
        result = grade_submission(lesson, "submission", path)
    data = gradescope_results(lesson, result, hidden_names(lesson), note, time.monotonic() - t0)
    tmp = results_dir / "results.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(results_dir / "results.json")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_cli.instructor.gradescope", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="grade the submission under ROOT (what run_autograder calls)")
    r.add_argument("--lesson", required=True)
    r.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    args = parser.parse_args(argv)
    root = Path(args.root)
    from course_cli.sandboxed.sandbox import SandboxUnavailable

    try:
        lesson = find_lesson(args.lesson)
        data = run(lesson, root)
    except SandboxUnavailable as exc:  # not graded: no results.json, so Gradescope shows a failed run, never a 0
        (root / "results" / "results.json").unlink(missing_ok=True)
        print(f"{exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the student sees a message, never a missing results file
        (root / "results").mkdir(parents=True, exist_ok=True)
        msg = f"The autograder could not grade this submission ({type(exc).__name__}: {str(exc)[:300]})."
        (root / "results" / "results.json").write_text(json.dumps(
            {"score": 0.0, "output": msg, "visibility": "visible", "stdout_visibility": "hidden", "tests": []}))
        print(msg, file=sys.stderr)
        return 1
    print(f"{lesson.id}: {data['score']:g}/{data['extra_data']['max_score']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
