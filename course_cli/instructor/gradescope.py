"""`course gradescope LESSON`: a Gradescope autograder for one lesson, and what it runs for each submission.

The zip holds Gradescope's two scripts at its root and the course beside them (`course/`: the graders, the solved
notebooks the reference comes from, the pinned versions). `setup.sh` installs the course's pinned environment and
bubblewrap once, when Gradescope builds the image; `run_autograder` grades the submitted notebook exactly as
`course grade` grades one student (sandboxed child, reference computed afresh) and writes
`results/results.json` in Gradescope's format:

- one test per exercise, visible: the course's points for it (the same as `course check`), and as output the
  course's feedback on its checks, the hidden ones as the README's policy says (`results.for_students`: names
  and statuses; no message, figure or diagnosis derived from them, which would tell the inputs drawn for the run);
- the top-level `score`, the sum of the exercises' points.

The root (`/autograder` on Gradescope) comes from `--root` or `AUTOGRADER_ROOT`, so a test runs the real
`run_autograder` in a temporary tree laid out as Gradescope lays it out.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import zipfile
from pathlib import Path

from course_cli import settings
from graders.registry import ROOT, Lesson, find_lesson
from graders.engine.results import LessonResult

MARKER = "course/.gradescope-autograder"  # inside the zip: this file says the zip is ours

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the base image Gradescope
# documents: Ubuntu 22.04, whose python3 is 3.10, so Python 3.11 comes from Ubuntu's own python3.11 package;
# Ubuntu 24.04's python3 is 3.12). It installs the course, then STARTS its sandbox on the lesson's solution:
# when the sandbox cannot start here (no user namespaces), the build fails, with the reason, before any
# student submits. AUTOGRADER_ROOT moves the root (the course's tests build in a temporary /autograder).
set -euxo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
export DEBIAN_FRONTEND=noninteractive
if [ "${{COURSE_SETUP_APT:-1}}" = 1 ]; then
    apt-get update
    # bubblewrap: every process that runs a submission's code is sandboxed with it
    apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
fi
PY=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    [ "${{COURSE_SETUP_APT:-1}}" = 1 ] && apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PY=python3.11
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the course needs Python >= 3.11")'
"$PY" -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install --upgrade pip
# the course's pinned environment (constraints.txt), with torch's CPU build: Gradescope has no GPU
"$ROOT/venv/bin/pip" install -c "$ROOT/source/course/constraints.txt" \\
    --extra-index-url https://download.pytorch.org/whl/cpu "$ROOT/source/course{extra}"
"$ROOT/venv/bin/python" -c 'import course_cli.instructor.gradescope, graders.{module}; print("the course is installed")'
# start the sandbox: grade the lesson's solution in it, as every submission will be graded
cd "$ROOT/source/course"
# a smoke child first: the build fails here, with the fixing command, when the sandbox cannot start at all
"$ROOT/venv/bin/python" -m course_cli.sandboxed.sandbox smoke || {{
    echo "the course's sandbox (bubblewrap) cannot start in this image; see the message above" >&2; exit 1; }}
"$ROOT/venv/bin/python" -m course_cli.instructor.gradescope selftest --lesson {lesson}
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
    """Write the autograder zip; returns its members. A file at `out` that is not such a zip (a link included,
    which is not followed) is kept as .bak. Built in memory, then written as course_cli/atomic.py does."""
    from course_cli.atomic import read_bytes, write_bytes

    out = Path(out)
    try:
        ours = MARKER in zipfile.ZipFile(io.BytesIO(read_bytes(out))).namelist()
    except (zipfile.BadZipFile, OSError):
        ours = False
    names = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            names.append(name)

        extra = "[triton]" if lesson.triton else ""
        add("setup.sh", SETUP.format(extra=extra, module=f"{lesson.id}_{lesson.slug}", lesson=lesson.id).encode(),
            0o755)
        add("run_autograder", RUN.format(lesson=lesson.id).encode(), 0o755)
        for p in course_files():
            add("course/" + p.relative_to(ROOT).as_posix(), p.read_bytes())
        add(MARKER, f"{lesson.id}\n".encode())
    write_bytes(out, buf.getvalue(), backup=not ours)
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
    from graders.engine.notebook import renamed_note

    if len(found) == 1:
        return found[0], renamed_note(found[0].name, lesson.notebook)  # the policy of every seat
    if not found:
        return None, f"no notebook was submitted: upload {lesson.notebook}"
    names = ", ".join(p.name for p in found)
    return None, f"{len(found)} notebooks were submitted ({names}) and none is {lesson.notebook}: submit that one"


def hidden_names(lesson: Lesson) -> dict[tuple[str, str], str]:
    """{(exercise, hidden check): the property it tests, the name of its public check} (see `for_students`)."""
    import importlib

    from graders.engine.checks import hidden_properties

    return hidden_properties(importlib.import_module(lesson.module).CHECKS)


_MARK = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "⏱", "not_implemented": "·", "skipped": "–"}


def _feedback(ex) -> str:
    from course_cli.render import diagnosis_label  # a fact is said under its own label, not as a mistake

    lines = [f"{ex.status.replace('_', ' ')}: {ex.points:g}/{ex.max_points:g} points"]
    if ex.diagnosis:
        lines.append(f"{diagnosis_label(ex.diagnosis_id, ex.diagnosis)}{ex.diagnosis}")
    if ex.checks:
        lines.append("Checks:")
    for c in ex.checks:
        where = f" [{c.device}/{c.dtype}]"
        if c.status == "skipped":
            continue
        if c.status == "passed":
            lines.append(f"  {_MARK['passed']} {c.name}{where}")
        else:
            lines.append(f"  {_MARK.get(c.status, '?')} {c.name}{where}: {c.status.replace('_', ' ')}"
                         + (f"\n      " + c.message.replace("\n", "\n      ") if c.message else ""))
    skipped = sum(c.status == "skipped" for c in ex.checks)
    if skipped:
        lines.append(f"  {_MARK['skipped']} {skipped} GPU check run(s) skipped: no GPU here (skipped is not passed)")
    return "\n".join(lines)


def gradescope_results(lesson: Lesson, result: LessonResult, hidden: dict[tuple[str, str], str], note: str = "",
                       seconds: float | None = None) -> dict:
    """Gradescope's results.json for one graded submission: points as `course check` gives them, and the hidden
    checks as the README's policy says (`graders.engine.results.for_students`: names and statuses; the diagnosis
    from the public checks alone)."""
    from graders.engine.results import for_students

    result = for_students(result, hidden)
    note = note or result.note
    if result.not_graded:  # Gradescope has no "not graded": 0 points, and the page says NOT GRADED and why
        head = f"{lesson.id} ({lesson.title}): NOT GRADED: {result.not_graded}"
        tests = [{"name": ex.id, "score": 0.0, "max_score": ex.max_points, "status": "failed",
                  "output": f"NOT GRADED: {result.not_graded}", "visibility": "visible"} for ex in result.exercises]
        return _as_text({"score": 0.0, "output": head, "output_format": "text", "visibility": "visible",
                         "stdout_visibility": "hidden", "tests": tests,
                         "extra_data": {"lesson": lesson.id, "max_score": result.max_score,
                                        "not_graded": result.not_graded}})
    tests = [{"name": ex.id, "score": ex.points, "max_score": ex.max_points,
              "status": "passed" if ex.status == "passed" else "failed",
              "output": _feedback(ex), "visibility": "visible"} for ex in result.exercises]
    head = f"{lesson.id} ({lesson.title}): {result.score:g}/{result.max_score:g} points."
    if note:
        head += f"\n{note}"
    if any(ex.status != "passed" for ex in result.exercises):
        head += ("\nAn exercise scores its points when every check passes, the ones on inputs drawn for this run "
                 f"(fresh inputs) included; run `course check {lesson.id}` on your own machine for the full story.")
    # output_format "text": Gradescope shows every output as plain text, never as HTML, Markdown or ANSI, so
    # a message a submission wrote (an exception's text) is shown, never rendered
    data = {"score": result.score, "output": head, "output_format": "text", "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests, "extra_data": {"lesson": lesson.id, "max_score": result.max_score}}
    if seconds is not None:
        data["execution_time"] = round(seconds, 1)
    return _as_text(data)


def _as_text(data: dict) -> dict:
    """`data` with its outputs safe to show as text (course_cli.safe_text.for_terminal: a submission's control,
    bidirectional and line-separator characters written as escapes, never sent to the page)."""
    from course_cli.safe_text import for_terminal

    data["output"] = for_terminal(data["output"], None)
    for t in data["tests"]:
        t["output"] = for_terminal(t["output"], None)
    return data


def run(lesson: Lesson, root: Path) -> dict:
    """Grade `root`/submission's notebook, write `root`/results/results.json; returns what was written."""
    from course_cli.classes.dispatch import grade_submission
    from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

    from course_cli.sandboxed import sandbox

    t0 = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    sandbox.require_sandbox()  # SandboxUnavailable: an error of the autograder, never a score of 0
    path, note = find_submission(root / "submission", lesson)
    if path is None:
        result = error_result(lesson, "", note, not_graded=True)
    else:
        # one submission per process: the reference's mutants on demand (a passing one never waits for them)
        with settings.mutants_on_demand():
            result = grade_submission(lesson, "submission", path, root=root / "submission")  # no link out of it
        result.note = note
    data = gradescope_results(lesson, result, hidden_names(lesson), note, time.monotonic() - t0)
    from course_cli.atomic import write_text

    write_text(results_dir / "results.json", json.dumps(data, indent=1, ensure_ascii=False))
    return data


GRADESCOPE_USERNS = (
    "On Gradescope: bubblewrap needs unprivileged user namespaces inside the autograder's container. Rebuild on "
    "the default Ubuntu 22.04 base image (its kernel allows them); if the build still fails here, ask Gradescope "
    "support to allow user namespaces for the assignment's container (or to run it privileged), and grade with "
    "`course grade` on your side meanwhile.")


def selftest(lesson: Lesson) -> int:
    """Start the sandbox as a submission's grading will (bubblewrap's namespaces, then the lesson's solution
    graded in the sandboxed child: full points). 0 when it works; else 1, with the reason on stderr."""
    from course_cli.sandboxed import sandbox

    ok, why = sandbox.bwrap_status()
    if not ok:
        print(f"the sandbox cannot start here: {why}. {GRADESCOPE_USERNS}", file=sys.stderr)
        return 1
    from course_cli.classes.dispatch import grade_submission

    t0 = time.monotonic()
    with settings.mutants_on_demand():
        result = grade_submission(lesson, "selftest", lesson.solution_path)
    if result.score != result.max_score:
        bad = "; ".join(f"{ex.id}: {ex.status} ({ex.reason})" for ex in result.exercises if ex.status != "passed")
        print(f"the sandbox started, but the solution of {lesson.id} scored {result.score:g}/{result.max_score:g} "
              f"in it: {bad[:800]}", file=sys.stderr)
        return 1
    print(f"the sandbox works: {lesson.id}'s solution graded in it, {result.score:g}/{result.max_score:g}, "
          f"in {time.monotonic() - t0:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_cli.instructor.gradescope", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="grade the submission under ROOT (what run_autograder calls)")
    r.add_argument("--lesson", required=True)
    r.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    t = sub.add_parser("selftest", help="start the sandbox on the lesson's solution (what setup.sh calls)")
    t.add_argument("--lesson", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "selftest":
        return selftest(find_lesson(args.lesson))
    root = Path(args.root)
    from course_cli.sandboxed.sandbox import SandboxUnavailable

    try:
        lesson = find_lesson(args.lesson)
        data = run(lesson, root)
    except SandboxUnavailable as exc:  # an error, not a score: no results.json, so Gradescope shows it failed
        (root / "results" / "results.json").unlink(missing_ok=True)
        print(f"NOT GRADED: the autograder's sandbox cannot start on this machine, so no submission is graded "
              f"(no score is given). {exc}. {GRADESCOPE_USERNS}", file=sys.stderr)
        return 3
    except Exception as exc:  # the student sees a message, never a missing results file
        msg = (f"NOT GRADED: the autograder could not grade this submission ({type(exc).__name__}: "
               f"{str(exc)[:300]}); no score is given.")
        # no results.json: Gradescope records the run as failed, never as 0 points (fail closed), as above
        (root / "results" / "results.json").unlink(missing_ok=True)
        print(msg, file=sys.stderr)
        return 1
    print(f"{lesson.id}: {data['score']:g}/{data['extra_data']['max_score']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
