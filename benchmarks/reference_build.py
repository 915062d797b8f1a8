"""How long a lesson's reference child takes, and how far it gets into each exercise's mutation candidates:
`COURSE_CACHE_DIR=<empty folder> COURSE_MUTANT_BUDGET=<seconds> python benchmarks/reference_build.py lesson07 ...`
builds each reference as a first check does (grading.Reference, the sandboxed reference child) and prints its
time and, per exercise, (candidates tried, skipped, seconds of probing)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_cli import settings  # noqa: E402
from course_cli.sandboxed import grading  # noqa: E402
from graders.registry import find_lesson  # noqa: E402

for lesson_id in sys.argv[1:]:
    lesson = find_lesson(lesson_id)
    t = time.perf_counter()
    ref = grading.Reference.finish(lesson, *grading.Reference.start(lesson, "cpu"), "cpu")
    took = time.perf_counter() - t
    reach = {e: (c.get("tried"), c.get("skipped"), c.get("seconds")) for e, c in ref.mutation.items()}
    print(lesson_id, f"budget={settings.mutant_budget() or 'default'} build {took:.1f} s", json.dumps(reach), flush=True)
