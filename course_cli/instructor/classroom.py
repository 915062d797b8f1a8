"""`course classroom`: GitHub Classroom autograding for a template repository of lesson notebooks.

Classroom points are practice feedback, never marks (HONEST, written at the top of the workflow): the public
checks run in the student's own repository, whose workflow file the student owns, and the public checks'
reference outputs ship with the student distribution. Marks come from `course grade`, nbgrader or Gradescope.

It writes, into the template repository:
- `.github/workflows/classroom.yml`: on every push, install the course at its pinned versions, run
  `course check LESSON --public --notebook lessons/<notebook> --json` once per lesson (the public checks: the
  hidden ones stay with the instructor's `course grade`), then one `autograding-command-grader` step per exercise,
  worth the exercise's points, that passes when the exercise passed; the `autograding-grading-reporter` step
  reports the points to GitHub Classroom. The JSON results are kept as the run's artifact.
- `.github/classroom/autograding.json`: the same tests in the older Classroom format (`education/autograding`).
- `.github/classroom/constraints.txt`: the course's pinned versions.

`python -I -m course_cli.instructor.classroom verdict RESULTS.json EXERCISE` is what each exercise's step runs
(isolated: a `course_cli/` folder committed at the repository's root cannot shadow it).
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
    nb = f"{notebooks.rstrip('/')}/{lesson.notebook}"
    return (f"course check {lesson.id} --public --notebook {_shell_quote(nb)} --json "
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
                          "run": f"course check {lesson.id} {ex.name} --public --notebook {_shell_quote(nb)}",
                          "input": "", "output": "", "comparison": "included", "timeout": timeout_min,
                          "points": ex.points})
    if tests:
        tests[0]["setup"] = ("sudo apt-get update && sudo apt-get install -y bubblewrap && sudo sysctl -w "
                             "kernel.apparmor_restrict_unprivileged_userns=0; " + install_command(package))
    return {"tests": tests}


def write(target: Path, lessons: list[Lesson], package: str, notebooks: str = "lessons") -> list[tuple[Path, str]]:
    """Write the three files under `target`; a different file already there is kept as `<name>.bak`.
    Returns [(path, "wrote" | "unchanged")]."""
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


def verdict(results: Path, exercise: str) -> tuple[int, str]:
    """(exit code, text) for one exercise of a `course check --json` file: 0 only when it passed."""
    try:
        data = json.loads(Path(results).read_text(encoding="utf-8"))
        ex = next(e for e in data["exercises"] if e["id"] == exercise)
    except (OSError, ValueError, KeyError, TypeError):
        return 1, (f"{exercise}: the grader produced no result in {results}: see the step that grades "
                   f"{Path(results).stem} for what went wrong (is the notebook committed?)")
    except StopIteration:
        return 1, f"{exercise}: not in {results}"
    from course_cli.render import diagnosis_label  # a fact is said under its own label, not as a mistake

    lines = [f"{exercise}: {ex['status'].replace('_', ' ')} ({ex['points']:g}/{ex['max_points']:g})"]
    if ex.get("diagnosis"):
        lines.append(f"{diagnosis_label(ex.get('diagnosis_id'), ex['diagnosis'])}{ex['diagnosis']}")
    for c in ex.get("checks", []):
        if c.get("status") not in ("passed", "skipped"):
            lines.append(f"  {c.get('status')}: {c.get('name')} [{c.get('device')}/{c.get('dtype')}] "
                         f"{c.get('message', '')}")
    return (0 if ex["status"] == "passed" else 1), "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "verdict":
        print("usage: python -m course_cli.instructor.classroom verdict RESULTS.json EXERCISE", file=sys.stderr)
        return 2
    code, text = verdict(Path(argv[1]), argv[2])
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
