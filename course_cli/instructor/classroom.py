"""`course classroom`: GitHub Classroom autograding for a template repository of lesson notebooks.

Classroom points are practice feedback, never marks (HONEST, written at the top of the workflow): the public
checks run in the student's own repository, whose workflow file the student owns, and the public checks'
reference outputs ship with the student distribution. Marks come from `course grade`, nbgrader or Gradescope.

It writes, into the template repository:
- `.github/workflows/classroom.yml`: on every push, install the course at its pinned versions, run
  `course check LESSON --public --notebook lessons/<notebook> --json` once per lesson, through `check` below (the
  public checks: the hidden ones stay with the instructor's `course grade`), then one
  `autograding-command-grader` step per exercise, worth the exercise's points, that passes when the exercise
  passed; the `autograding-grading-reporter` step reports the points to GitHub Classroom. The JSON results are
  kept as the run's artifact.
- `.github/classroom/autograding.json`: the same tests in the older Classroom format (`education/autograding`).
- `.github/classroom/constraints.txt`: the course's pinned versions.

`python -I -m course_cli.instructor.classroom check LESSON NOTEBOOK` is what each lesson's step runs: `course
check --public --json`, the notebook read as a submission inside the repository's root (a committed link on any
folder on the way, `lessons -> /elsewhere`, is refused: NOT GRADED, nothing read through it).
`python -I -m course_cli.instructor.classroom verdict RESULTS.json EXERCISE` is what each exercise's step runs
(isolated, both: a `course_cli/` folder committed at the repository's root cannot shadow them).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from graders.registry import ROOT, Lesson

# What Classroom points are, said in the workflow the instructor commits and in the README: practice feedback.
HONEST = (
    "Classroom points from this workflow are PRACTICE FEEDBACK, NEVER MARKS. They come from the course's public",
    "checks, run in the student's own repository, on a runner the student controls: the student owns this file",
    "(and can edit it), and the public checks' reference outputs ship with the student distribution (a notebook",
    "that looks its inputs up there scores full points). Anyone can forge these points.",
    "For marks, grade the collected notebooks on your side, with the hidden checks and a fresh sandbox:",
    "`course grade`, nbgrader (`course nbgrader`) or Gradescope (`course gradescope`).",
)
PYTHON = "3.11"  # the Python the course is tested with (constraints.txt is resolved for it)
GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
RESULTS_DIR = ".course-results"
TORCH_CPU = "https://download.pytorch.org/whl/cpu"


def step_id(lesson: Lesson, exercise: str) -> str:
    """A step id GitHub accepts (letters, digits, - and _), lower case: the reporter upper-cases it."""
    return re.sub(r"[^a-z0-9-]", "-", f"{lesson.id}-{exercise}".lower())


def _q(s: str) -> str:
    """A YAML scalar: JSON's double-quoted string is valid YAML."""
    return json.dumps(s, ensure_ascii=False)


def install_command(package: str) -> str:
    return (f"python -m pip install -c .github/classroom/constraints.txt --extra-index-url {TORCH_CPU} "
            f"{_shell_quote(package)}")


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def check_command(lesson: Lesson, notebooks: str) -> str:
    # the notebook is read as a submission inside the repository's root (`check`), isolated as the verdict step
    nb = f"{notebooks.rstrip('/')}/{lesson.notebook}"
    return (f"python -I -m course_cli.instructor.classroom check {lesson.id} {_shell_quote(nb)} "
            f"> {RESULTS_DIR}/{lesson.id}.json || true")


def verdict_command(lesson: Lesson, exercise: str) -> str:
    # -I (isolated): the repository's folder is not on sys.path and PYTHON* variables are ignored, so a
    # `course_cli/` folder a student commits at the repository's root cannot replace this step
    return f"python -I -m course_cli.instructor.classroom verdict {RESULTS_DIR}/{lesson.id}.json {exercise}"


def workflow(lessons: list[Lesson], package: str, notebooks: str = "lessons", timeout_min: int = 10) -> str:
    ids = [(lesson, ex, step_id(lesson, ex.name)) for lesson in lessons for ex in lesson.exercises]
    y = ["# Written by `course classroom`: GitHub Classroom autograding for the attention course.",
         "# On every push: the course's public checks on the committed notebooks, points per exercise.",
         "#", *(f"# {line}" for line in HONEST),
         "name: Autograding (attention course, practice feedback)",
         '"on":', "  - push", "  - workflow_dispatch", "  - repository_dispatch",
         "permissions:", "  checks: write", "  actions: read", "  contents: read",
         "jobs:", "  run-autograding-tests:", "    runs-on: ubuntu-24.04",
         "    if: github.actor != 'github-classroom[bot]'", "    timeout-minutes: 60", "    steps:",
         "      - name: Checkout code", "        uses: actions/checkout@v4",
         "      - name: " + _q("Set up Python, with pip's cache kept between runs (the CPU torch wheel, JupyterLab, "
                             "nbgrader)"),
         "        uses: actions/setup-python@v5", "        with:",
         f'          python-version: "{PYTHON}"', "          cache: pip",
         "          cache-dependency-path: .github/classroom/constraints.txt",
         "      - name: Install the course (pinned versions) and bubblewrap", "        env:",
         "          PIP_DISABLE_PIP_VERSION_CHECK: \"1\"", "        run: |",
         "          sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap",
         "          # Ubuntu 24.04 forbids unprivileged user namespaces by default; bubblewrap needs them",
         "          sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true",
         f"          {install_command(package)}"]
    for lesson in lessons:
        y += [f"      - name: {_q(f'Practice feedback: {lesson.id} (public checks, not marks)')}", "        run: |",
              f"          mkdir -p {RESULTS_DIR}", f"          {check_command(lesson, notebooks)}"]
    for lesson, ex, sid in ids:
        y += [f"      - name: {_q(f'{lesson.id} {ex.name}')}", f"        id: {sid}", f"        uses: {GRADER}",
              "        with:", f"          test-name: {_q(f'{lesson.id} {ex.name}')}",
              f"          command: {_q(verdict_command(lesson, ex.name))}",
              f"          timeout: {timeout_min}", f"          max-score: {ex.points:g}"]
    y += ["      - name: Keep the results", "        if: always()", "        uses: actions/upload-artifact@v4",
          "        with:", "          name: course-results", f"          path: {RESULTS_DIR}/",
          "      - name: Autograding Reporter", f"        uses: {REPORTER}", "        env:"]
    y += [f"          {sid.upper()}_RESULTS: \"${{{{steps.{sid}.outputs.result}}}}\"" for _, _, sid in ids]
    y += ["        with:", f"          runners: {','.join(sid for _, _, sid in ids)}"]
    return "\n".join(y) + "\n"


def autograding_json(lessons: list[Lesson], package: str, notebooks: str = "lessons", timeout_min: int = 10) -> dict:
    """The older GitHub Classroom format: each test runs on its own, the first one installs the course."""
    tests = []
    for lesson in lessons:
        nb = f"{notebooks.rstrip('/')}/{lesson.notebook}"
        for ex in lesson.exercises:
            tests.append({"name": f"{lesson.id} {ex.name}", "setup": "",
                          "run": f"python -I -m course_cli.instructor.classroom check {lesson.id} "
                                 f"{_shell_quote(nb)} {ex.name}",
                          "input": "", "output": "", "comparison": "included", "timeout": timeout_min,
                          "points": ex.points})
    if tests:
        tests[0]["setup"] = ("sudo apt-get update && sudo apt-get install -y bubblewrap && sudo sysctl -w "
                             "kernel.apparmor_restrict_unprivileged_userns=0; " + install_command(package))
    return {"tests": tests}


def notebooks_folder(notebooks: str) -> str:
    """`--notebooks` as a folder inside the students' repository ("./lessons/" -> "lessons"); ValueError, in
    words for the instructor, for an absolute path, a `..` part, or a control character: the workflow reads
    the notebook only inside the repository (`check`), so such a folder would fail every student's run."""
    import posixpath

    shown = repr(notebooks) if not notebooks.isprintable() else notebooks
    if not notebooks.strip() or not notebooks.isprintable():
        raise ValueError(f"--notebooks {shown}: give a folder inside the students' repository, such as lessons")
    if notebooks.startswith(("/", "~")) or "\\" in notebooks:
        raise ValueError(f"--notebooks {shown}: an absolute path; give the folder relative to the root of the "
                         f"students' repository, such as lessons (the notebooks are read only inside it)")
    if ".." in notebooks.split("/"):
        raise ValueError(f"--notebooks {shown}: a path with `..` leaves the students' repository; give a "
                         f"folder inside it, such as lessons")
    return posixpath.normpath(notebooks)


def write(target: Path, lessons: list[Lesson], package: str, notebooks: str = "lessons") -> list[tuple[Path, str]]:
    """Write the three files under `target`; a different file already there is kept as `<name>.bak`.
    Returns [(path, "wrote" | "unchanged")]. ValueError (`notebooks_folder`) before anything is written."""
    notebooks = notebooks_folder(notebooks)
    files = {
        target / ".github" / "workflows" / "classroom.yml": workflow(lessons, package, notebooks),
        target / ".github" / "classroom" / "autograding.json":
            json.dumps(autograding_json(lessons, package, notebooks), indent=2) + "\n",
        target / ".github" / "classroom" / "constraints.txt": (ROOT / "constraints.txt").read_text(),
    }
    done = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            if path.read_text(encoding="utf-8", errors="replace") == text:
                done.append((path, "unchanged"))
                continue
        from course_cli.atomic import write_text

        write_text(path, text, backup=True)  # unpredictable name, renamed; the file replaced kept as .bak
        done.append((path, "wrote"))
    return done


def check(lesson_id: str, notebook: str, exercises: list[str] | None = None,
          root: Path | None = None) -> tuple[int, dict]:
    """`course check LESSON --public --notebook NOTEBOOK --json` as Classroom runs it: (exit code, the result as
    `course check --json` prints it). The notebook is read as a submission inside `root`, the repository's root
    (default: the folder the workflow runs in, which is the checkout): every folder between is opened without
    following links, so a committed link (`lessons -> /elsewhere`, or the notebook itself) is refused, NOT
    GRADED with the reason, and nothing is read through it. Exit codes as `course check`'s: 0 every exercise
    passed, 1 not, 2 not graded."""
    from course_cli.safe_text import json_clean
    from course_cli.sandboxed.grading import grade_notebook
    from graders.engine.results import for_students
    from graders.registry import find_lesson

    lesson = find_lesson(lesson_id)
    path = Path(notebook) if root is None else Path(root) / notebook  # as given, when the root is the cwd
    root = Path.cwd() if root is None else Path(root)
    result = for_students(grade_notebook(lesson, path, exercises, only_public=True, root=root))
    code = 2 if result.not_graded else 0 if result.all_passed else 1
    return code, json_clean(result.to_dict(), None)


def verdict(results: Path, exercise: str) -> tuple[int, str]:
    """(exit code, text) for one exercise of a `course check --json` file: 0 only when it passed."""
    try:
        data = json.loads(Path(results).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    return _verdict_of(data, exercise, str(results))


def _verdict_of(data, exercise: str, source: str) -> tuple[int, str]:
    try:
        ex = next(e for e in data["exercises"] if e["id"] == exercise)
    except (KeyError, TypeError):
        return 1, (f"{exercise}: the grader produced no result in {source}: see the step that grades "
                   f"{Path(source).stem} for what went wrong (is the notebook committed?)")
    except StopIteration:
        return 1, f"{exercise}: not in {source}"
    from course_cli.render import diagnosis_label  # a fact is said under its own label, not as a mistake

    lines = [f"{exercise}: {ex['status'].replace('_', ' ')} ({ex['points']:g}/{ex['max_points']:g})"]
    if ex.get("diagnosis"):
        lines.append(f"{diagnosis_label(ex.get('diagnosis_id'), ex['diagnosis'])}{ex['diagnosis']}")
    for c in ex.get("checks", []):
        if c.get("status") not in ("passed", "skipped"):
            lines.append(f"  {c.get('status')}: {c.get('name')} [{c.get('device')}/{c.get('dtype')}] "
                         f"{c.get('message', '')}")
    return (0 if ex["status"] == "passed" else 1), "\n".join(lines)


USAGE = ("usage: python -m course_cli.instructor.classroom verdict RESULTS.json EXERCISE\n"
         "       python -m course_cli.instructor.classroom check LESSON NOTEBOOK [EXERCISE]")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 3 and argv[0] == "verdict":
        code, text = verdict(Path(argv[1]), argv[2])
        print(text)
        return code
    if argv[:1] == ["check"] and len(argv) in (3, 4):
        return _check_main(*argv[1:])
    print(USAGE, file=sys.stderr)
    return 2


def _check_main(lesson_id: str, notebook: str, exercise: str | None = None) -> int:
    """`check LESSON NOTEBOOK`: the result as JSON (the workflow keeps it for the verdict steps); with EXERCISE,
    that exercise's verdict as text (the older autograding.json's tests), exit 0 only when it passed."""
    from course_cli.safe_text import for_terminal
    from course_cli.sandboxed.sandbox import SandboxUnavailable
    from graders.registry import UnknownLesson

    try:
        code, data = check(lesson_id, notebook, [exercise] if exercise else None)
    except (UnknownLesson, LookupError, SandboxUnavailable) as exc:
        print(for_terminal(f"error: {exc}", newlines=False), file=sys.stderr)
        return 2
    if exercise is None:
        print(json.dumps(data, ensure_ascii=False))
        return code
    code, text = _verdict_of(data, exercise, notebook)
    print(for_terminal(text))
    return code


if __name__ == "__main__":
    sys.exit(main())
