"""The README's instructor commands, run line by line as written."""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graders.registry import ROOT, find_lesson

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def guide_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- instructor-commands.*?```bash\n(.*?)```", readme, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_guide_runs_as_written(tmp_path):
    lesson = find_lesson("lesson01")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    cwd = tmp_path
    collected = False
    for line in guide_lines():
        if line.startswith("#"):
            if collected:  # the step's comment goes on over several lines: collect once
                continue
            collected = True
            # the collection step: two students hand in
            for student, source in (("alice", lesson.solution_path), ("bob", lesson.student_path)):
                folder = cwd / "submitted" / student / lesson.id
                folder.mkdir(parents=True)
                shutil.copy(source, folder / lesson.notebook)
            continue
        for part in line.split("&&"):
            args = shlex.split(part.split("#")[0])
            if args[0] == "cd":
                cwd = cwd / args[1]
                continue
            proc = subprocess.run([str(BIN / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert proc.returncode == 0, f"{part}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    grades = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((cwd / "grades.csv").open())}
    assert grades == {"alice": 10.0, "bob": 0.0}
    rows = list(csv.DictReader((cwd / "results.csv").open()))
    assert {r["student"] for r in rows} == {"alice", "bob"}
    assert (cwd / "feedback" / "alice" / "lesson01" / "lesson01_sdpa.html").exists()
