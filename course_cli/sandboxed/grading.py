"""Grading a notebook: extract its cells, run them and the probes in a child, judge here.

    notebook ─ read_notebook ─ graded_cells ─┐
                                             ├─ child (student) ──── obs-*.pt ─┐
    solutions/<lesson> ─ graded_cells ───────┴─ child (reference) ─ cache ─────┴─ judge ─ LessonResult

The reference child runs the solved notebook and the known mistakes once; its observations are cached,
keyed by the lesson's source, the grader, torch's version and the device. While the children work, this
process imports torch (it needs it to judge): on two cores the imports overlap.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import io
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from graders import registry
from graders.registry import LESSONS, ROOT, Lesson, find_lesson
from graders.engine.mutations import CAP as MUTANT_CAP, _identical, add_alias, entries as mutation_entries, exercise_of as mutation_exercise, key as mutation_key
from graders.engine.kinds import is_cause
from graders.engine.results import PUBLIC_ONLY_NOTE, LessonResult

from course_cli import atomic, settings
from course_cli.sandboxed import readback, sandbox
from course_cli.sandboxed.child import run as run_child
from course_cli.sandboxed.notebook import NotebookError, graded_cells, read_notebook
from course_cli.sandboxed.readback import ReadBackError, load_tensors


def _source_files(lesson: Lesson) -> list[Path]:
    """What the reference observations depend on: the lesson's solved notebook and those it imports
    (`import_lesson("lessonNN")`, transitively), their graders, the graders' shared modules (lm_probes.py,
    parts.py, ...) and the engine."""
    seen, todo = [], [lesson]
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.append(cur)
        if not cur.solution_path.exists():  # the student distribution
            continue
        text = cur.solution_path.read_text(encoding="utf-8")
        todo += [find_lesson(k) for k in re.findall(r"import_lesson\(\s*\\?['\"](\w+)", text)]
    g = ROOT / "graders"
    return ([l.solution_path for l in seen] + [g / f"{l.id}_{l.slug}.py" for l in seen]
            + sorted((g / "engine").glob("*.py"))
            + sorted(p for p in g.glob("*.py") if not p.name.startswith("lesson"))
            + [ROOT / "course_cli" / "sandboxed" / "child.py"])


def reference_key(lesson: Lesson, device: str) -> str:
    h = hashlib.sha256()
    h.update(lesson.id.encode())
    for p in _source_files(lesson):
        h.update(p.name.encode())
        h.update(p.read_bytes() if p.exists() else b"")
    h.update(importlib.metadata.version("torch").encode())
    h.update(device.encode())
    return h.hexdigest()[:24]


def cuda_available() -> bool:
    """Asked here, in the parent: the CPU child runs with CUDA hidden (CUDA_VISIBLE_DEVICES="")."""
    import torch  # lazy: torch takes 4.6 s to import here; this module's importers must not wait

    return torch.cuda.is_available()


def _load(path: Path):
    """A cache file of ours (written by this process's kind, out of the children's reach)."""
    import torch  # lazy: torch takes 4.6 s to import here; this module's importers must not wait

    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception:
        return None


class _Unreadable(dict):
    """Observations a child sent back that the grader does not accept (see course_cli.sandboxed.readback)."""

    def __init__(self, message: str):
        super().__init__()
        self.message = message


def _read_obs(path: Path):
    """A child's observation file: None when absent; _Unreadable when it is not plain, bounded data."""
    if not os.path.lexists(path):
        return None
    try:
        obs = load_tensors(path)
    except ReadBackError as exc:
        return _Unreadable(str(exc))
    why = _malformed(obs)
    if why:
        return _Unreadable(f"{path.name} is not an observation record ({why})")
    return obs


def _malformed(obs) -> str | None:
    """Why `obs` does not have the layout engine.probe_exercise writes, or None."""
    if not isinstance(obs, dict):
        return "not a dict"
    checks = obs.get("checks", {})
    if not isinstance(checks, dict):
        return "checks is not a dict"
    for k, v in checks.items():
        if not isinstance(v, dict):
            return f"check {k[:60]!r} is not a dict"
        err = v.get("__error__")
        if err is not None and not (isinstance(err, dict) and all(isinstance(err.get(f), str)
                                                                 for f in ("kind", "type", "message"))):
            return f"check {k[:60]!r} has a malformed error"
    for f in ("forbidden", "mutated"):
        if not (isinstance(obs.get(f, []), list) and all(isinstance(x, str) for x in obs.get(f, []))):
            return f"{f} is not a list of strings"
    for f in ("missing", "timeout", "out_of_memory"):
        if not isinstance(obs.get(f, False), bool):
            return f"{f} is not a bool"
    if not isinstance(obs.get("message", ""), str):
        return "message is not a string"
    return None


def _as_errors(module, name: str, bad: "_Unreadable") -> dict:
    """Unreadable observations as an error on every check of the exercise, with what was wrong."""
    err = {"__error__": {"kind": "error", "type": "ReadBack", "message": (
        f"the grader could not accept what your code's grading process sent back: {bad.message}")}}
    keys = [c.key(cfg) for c in module.CHECKS.of(name) for cfg in c.configs]
    return {"checks": {k: err for k in keys}, "forbidden": [], "mutated": []}


def _cell_reports(child) -> list[dict]:
    """cells.json, kept only if it is a list of plain cell reports."""
    reports = child.json("cells.json")
    if not isinstance(reports, list):
        return []
    ok = []
    for r in reports[:10_000]:
        if isinstance(r, dict) and isinstance(r.get("status"), str) and isinstance(r.get("index"), (int, str)) \
                and isinstance(r.get("error", ""), str):
            ok.append({"index": r["index"], "status": r["status"][:40], **({"error": r["error"][:2000]} if "error" in r else {})})
    return ok


def visible_solutions(lesson: Lesson) -> list[Path]:
    """The solved notebooks a lesson's notebook builds on: the earlier lessons its solved notebook imports
    (`import_lesson("lessonNN")`, transitively), never its own or a later one's, nor an earlier one it does
    not import."""
    return [p for p in _source_files(lesson) if p.suffix == ".ipynb" and p != lesson.solution_path
            and p.exists() and _lesson_number(p) < lesson.number]


def _lesson_number(path: Path) -> int:
    return next((l.number for l in LESSONS if l.solution_path == path), 10**6)


def shipped_reference(lesson: Lesson, device: str = "cpu") -> Path:
    """Where the student distribution keeps the public checks' reference observations."""
    return ROOT / "graders" / "data" / "reference" / f"{lesson.id}-{device}.pt"


_TRUSTED: dict[tuple, "Reference"] = {}  # fresh references, kept in this process's memory only


class Reference:
    """The solved notebook's and the mistakes' observations for one lesson and device.

    `course check` keeps them in a disk cache (a student can only fool themselves by editing it). Class
    grading (`course grade`, nbgrader's autograde) passes trusted=True: the reference is computed afresh by a
    child that runs only the solved notebook, and kept in this process's memory, out of reach of the
    submissions' children, which could write to the cache folder."""

    def __init__(self, exercises: dict, mistakes: dict, draws: dict | None = None, mutation: dict | None = None,
                 unread: dict[str, Path] | None = None):
        self.exercises, self.mistakes = exercises, mistakes  # mistakes: the catalogue's ids and the mutants' keys
        self.draws = draws or {}  # the examples its child drew over the declared domains (engine/draws.py)
        self.mutation = mutation or {}  # per exercise: the mutants tried, kept, dropped, skipped (the child's counts)
        # A cached reference keeps each exercise's mistakes in a file of their own, read when that exercise fails:
        # lesson 10's 192 mistakes took 3.4 s to read whole, on every check (issue 44's cost).
        self.unread = dict(unread or {})  # {exercise: its mistakes' file}
        self.path: Path | None = None  # the cache file it was read from (a follow-up adds to it), None in memory
        self.origin: "Reference | None" = None  # the warm server's own, when this is one grading's copy

    def next_candidate(self, exercise: str) -> int | None:
        """The first of `exercise`'s mutation candidates not probed yet (the reference child's time budget ran
        out before it), None when every one was."""
        counts = self.mutation.get(exercise) or {}
        skipped, total = counts.get("skipped", 0), counts.get("candidates", 0)
        if not (isinstance(skipped, int) and isinstance(total, int)) or skipped <= 0:
            return None
        return total - skipped

    def screened(self, exercise: str) -> dict[int, dict]:
        """`exercise`'s candidates a follow-up screened out on a student's failing check and never probed whole:
        {candidate: {check key: its observation there}} (read with the exercise's mistakes)."""
        entry = self.mistakes_of(exercise).get(screened_key(exercise))
        got = entry.get("screened") if isinstance(entry, dict) else None
        if not isinstance(got, dict):
            return {}
        return {n: v for n, v in got.items() if isinstance(n, int) and isinstance(v, dict)}

    def unprobed(self, exercise: str) -> bool:
        """Are some of `exercise`'s candidates not probed whole (past the budget, or screened out)?"""
        return self.next_candidate(exercise) is not None or bool(self.screened(exercise))

    def mistakes_of(self, exercise: str) -> dict:
        """Every mistake's observations read so far, `exercise`'s among them (read from its file if not yet)."""
        path = self.unread.pop(exercise, None)
        if path is not None:
            self.mistakes.update(_read_mistakes(path))
        return self.mistakes

    def for_one_grading(self) -> "Reference":
        """This reference for one grading: dicts of its own where a grading writes (Grading._add_gpu adds the GPU
        checks' observations to each exercise's and mistake's "checks"; a follow-up adds mistakes and counts), the
        observations themselves shared, since judging only reads them (tests/unit/test_reference_untouched.py
        holds it for every catalogued mistake). `origin` is this one, so a follow-up's mutants reach it too. A
        warm server's check and each student of a class grading take one (a deep copy took 0.75-1.0 s a student
        on lesson 10 once the engine's mutants joined the mistakes: 3,600 tensors)."""
        self.read_all()

        def own(entries: dict) -> dict:
            return {k: {**v, "checks": dict(v["checks"])} if isinstance(v.get("checks"), dict) else dict(v)
                    for k, v in entries.items()}

        mine = Reference(own(self.exercises), own(self.mistakes), self.draws, dict(self.mutation))
        mine.path, mine.origin = self.path, self
        return mine

    def read_all(self) -> "Reference":
        """Read every exercise's mistakes (a warm server keeps them in memory; the GPU pass merges them)."""
        for exercise in list(self.unread):
            self.mistakes_of(exercise)
        return self

    def __getstate__(self):  # pickled whole (a cluster's workers): no file of this machine's cache travels
        self.read_all()
        return {**self.__dict__, "origin": None}  # (the original stays in this process)

    @staticmethod
    def draws_at_hand(lesson: Lesson, path: Path | None, device: str = "cpu") -> dict:
        """The reference's draws for a student's child, before its observations are read: from this process's
        trusted reference, or the file beside the cached one ({} when there is none: the child draws)."""
        if path is None:
            ref = _TRUSTED.get((lesson.id, device, settings.hidden_seed()))
            return ref.draws if ref is not None else {}
        return _read_draws(path.with_suffix(".draws.json"))

    @staticmethod
    def inject(lesson: Lesson, reference: "Reference", device: str = "cpu") -> None:
        """Make `reference`, computed trusted by another process (`course grade --scheduler`'s client),
        this process's in-memory trusted reference: trusted=True gradings here then use it as is."""
        _TRUSTED[(lesson.id, device, settings.hidden_seed())] = reference

    @staticmethod
    def start(lesson: Lesson, device: str = "cpu", trusted: bool = False, runner=None):
        """Return (cache path or None, child or None): a child (`runner`, as Grading's; a fresh sandboxed one by
        default) starts only when nothing is at hand. An in-process runner's reference stays in memory."""
        if not lesson.solution_path.exists():  # the student distribution: public references ship as data
            path = shipped_reference(lesson, device)
            if not path.exists():
                raise RuntimeError(f"this installation has no reference for {lesson.id} on {device}")
            return path, None
        if trusted or isinstance(runner, InProcess):
            trusted = True  # (an in-process reference never goes to the shared cache)
            if (lesson.id, device, settings.hidden_seed()) in _TRUSTED:
                return None, None
            path = None
        else:
            path = settings.cache_dir() / f"{lesson.id}-{device}-{reference_key(lesson, device)}.pt"
            if path.exists():  # read (and checked) in finish, while the student's child works
                return path, None
        cells = graded_cells(read_notebook(lesson.solution_path))
        if not isinstance(runner, InProcess):
            runner = sandbox.start  # a warm zygote forks students' checks only: the reference starts fresh
        seed = settings.hidden_seed() if trusted else None
        child = runner(lesson.module, cells, [e.name for e in lesson.exercises], device, mistakes=True,
                       visible=[ROOT / "solutions"], strict=trusted, hidden_seed=seed)
        return path, child

    @staticmethod
    def finish(lesson: Lesson, path: Path | None, child, device: str = "cpu") -> "Reference":
        import torch  # lazy: 4.6 s here, taken while the children work (start, then finish)

        if child is None and path is None:
            return _trusted_copy(lesson, device)
        if child is not None:
            child.wait()
            try:
                child.raise_if_never_started()
            except sandbox.SandboxFailed:
                child.cleanup()
                raise
            counts, died_in = _mutation_progress(child.json("mutants.json"))
            if child.death() and not died_in:
                child.cleanup()
                raise RuntimeError(f"the reference solution of {lesson.id} failed to run: {child.death()}\n"
                                   f"{child.text('stderr.txt')}")
            # died_in: a mutation candidate killed the child (a Triton kernel writing out of bounds under the
            # interpreter): what came before it stands, and a failing check follows up after it, or from the
            # first candidate of an exercise it never reached
            for e in lesson.exercises if died_in else ():
                counts.setdefault(e.name, {"candidates": MUTANT_CAP, "skipped": MUTANT_CAP, "next": 0})
            data = {"exercises": {e.name: _read_obs(child.files / f"obs-{e.name}.pt") for e in lesson.exercises},
                    "mistakes": {}}
            for f in child.files.glob("mistake-*.pt"):
                data["mistakes"][f.stem.removeprefix("mistake-")] = _read_obs(f)
            data["mistakes"].update(_read_mutants(lesson, child))
            data["mutation"] = counts
            drawn = _read_draws(child.files / "draws.json")
            child.cleanup()
            bad = [k for k, v in data["exercises"].items() if v is None or isinstance(v, _Unreadable)]
            if bad:
                raise RuntimeError(f"the reference solution of {lesson.id} left no observations for {', '.join(bad)}")
            data["mistakes"] = {k: dict(v) for k, v in data["mistakes"].items() if v is not None and not isinstance(v, _Unreadable)}
            if path is None:
                key = (lesson.id, device, settings.hidden_seed())
                _TRUSTED[key] = Reference(data["exercises"], data["mistakes"], drawn, data["mutation"])
                return _trusted_copy(lesson, device)
            _write_cache(lesson, path, data, drawn)
        data = _load(path)
        split = data.get("split") if isinstance(data, dict) else None
        if not (isinstance(data, dict) and isinstance(data.get("exercises"), dict)
                and isinstance(data.get("mistakes"), dict)
                and all(isinstance(data["exercises"].get(e.name), dict) for e in lesson.exercises)
                and (split is None or (isinstance(split, list) and set(split) <= {e.name for e in lesson.exercises}
                                       and all(_mistakes_path(path, e).exists() for e in split)))):
            if not lesson.solution_path.exists():
                raise RuntimeError(f"the reference observations in {path} cannot be read; reinstall the course")
            path.unlink(missing_ok=True)  # damaged (or tampered with, unsandboxed): computed afresh
            return Reference.finish(lesson, *Reference.start(lesson, device), device)
        reference = Reference(data["exercises"], data["mistakes"], _read_draws(path.with_suffix(".draws.json")),
                              data.get("mutation") if isinstance(data.get("mutation"), dict) else {},
                              {e: _mistakes_path(path, e) for e in split or ()})
        reference.path = path if split is not None else None  # (only a split cache takes a follow-up's mutants)
        return reference


def _trusted_copy(lesson: Lesson, device: str) -> Reference:
    """One grading's copy of this process's trusted reference (`Reference.for_one_grading`); a follow-up's mutants
    reach the original too (`origin`), so the class's next students are judged with them."""
    return _TRUSTED[(lesson.id, device, settings.hidden_seed())].for_one_grading()


def _read_mutants(lesson: Lesson, child) -> dict:
    """The engine's mutants a reference child kept (graders/engine/mutations.py): {key: observations}."""
    found = {}
    for f in sorted(child.files.glob("mutant-*.pt")):
        exercise, _, n = f.stem.removeprefix("mutant-").rpartition("-")
        if n.isdigit() and any(e.name == exercise for e in lesson.exercises):
            found[mutation_key(exercise, int(n))] = _read_obs(f)
    return found


def screened_key(exercise: str) -> str:
    """Where an exercise's screened candidates sit among a reference's mistakes: an entry that names no mistake
    ({"checks": {}, "screened": {candidate: {check key: observation}}}), saved in the exercise's file."""
    return f"screened:{exercise}"


def screens(module, obs: dict, result: LessonResult, exercises: list[str]) -> dict:
    """{exercise: (check key, the student's observation there)}: the check a follow-up screens each exercise's
    candidates on, the smallest of those the student failed (the cheapest to run; any failed check rules out
    as surely). An exercise with no such observation is not in it (its candidates run the whole battery)."""
    out = {}
    for r in result.exercises:
        if r.id not in exercises or not isinstance(obs.get(r.id), dict):
            continue
        seen = obs[r.id].get("checks") or {}
        failed = [c for c in r.checks if c.status in ("failed", "error") and isinstance(seen.get(_key(c)), dict)]
        if failed:
            c = min(failed, key=lambda c: c.size or float("inf"))
            out[r.id] = (_key(c), seen[_key(c)])
    return out


def _key(c) -> str:
    """A check result's observation key (engine.checks Check.key)."""
    return f"{c.name} @ {c.device}/{c.dtype}"


def follow_up(lesson: Lesson, reference: Reference, exercises: list[str], screen: dict | None = None,
              trusted: bool = False) -> list[str]:
    """Probe the mutation candidates of `exercises` (each failed a check and no cause was named) that were never
    probed whole: those the reference child's time budget left, and those an earlier follow-up screened out on
    another check. A reference child (the solved notebook, in the sandbox, on the reference's own draws) probes
    them by count. With `screen` ({exercise: (check key, the student's observation)}, as `screens` gives) each
    candidate first runs that one check, and only those it does not rule out (diagnosis.rules_out) run the whole
    battery; what each gave on the check is kept, so a candidate it ruled out for this student is ruled out here,
    in the parent, the next time, and a check that fails the same way starts no child. What it probes whole joins
    `reference` (and the warm server's, and the disk cache). Returns the exercises it added to.

    trusted=True (class grading): `reference` is this process's in-memory one, drawn with the class's hidden seed;
    the child probes with that seed, and what it finds joins the in-memory reference (`origin`), never a file.
    Probing by count, the cause named does not depend on how many candidates the reference child's time budget
    reached on this machine: every seat names the same one."""
    running = FollowUp.start(lesson, reference, exercises, screen, trusted)
    return running.finish() if running is not None else []


class FollowUp:
    """One follow-up's child in flight (`follow_up` is `start`, then `finish`). The warm server also starts one
    for an exercise when no check is running (course_cli/sandboxed/warm.py, the idle probes), waits for its child
    on a thread of its own, and finishes it between checks."""

    def __init__(self, lesson: Lesson, reference: Reference, plan: dict, child, trusted: bool):
        self.lesson, self.reference, self.plan, self.child, self.trusted = lesson, reference, plan, child, trusted

    @staticmethod
    def start(lesson: Lesson, reference: Reference, exercises: list[str], screen: dict | None = None,
              trusted: bool = False, nice: int = 0) -> "FollowUp | None":
        """Plan `exercises`' candidates and start the child that probes them (`nice`: its scheduling priority,
        inherited by everything it starts); None when there is nothing to probe."""
        module = __import__(lesson.module, fromlist=["CHECKS"])
        screen = screen or {}
        plan = {}
        for e in exercises:
            first, total = reference.next_candidate(e), (reference.mutation.get(e) or {}).get("candidates")
            todo = list(range(first, total)) if first is not None and isinstance(total, int) else []
            for n, seen in sorted(reference.screened(e).items()):
                if not (e in screen and screen[e][0] in seen and _rules_out(module, e, screen[e], seen, reference)):
                    todo.append(n)
            if todo:
                plan[e] = {"candidates": sorted(todo), "screen": screen[e][0] if e in screen else None}
        if not plan or (reference.path is None and not trusted):
            return None
        import torch  # lazy: torch costs 1-2 s to import, and a passing check never gets here (it judged: loaded)

        for e, asked in plan.items():
            if asked["screen"]:  # the student's observation, as data the child loads with weights_only
                buf = io.BytesIO()
                torch.save(screen[e][1], buf)
                asked["student"] = base64.b64encode(buf.getvalue()).decode()
        child = sandbox.start(lesson.module, graded_cells(read_notebook(lesson.solution_path)), list(plan), "cpu",
                              mistakes=True, visible=[ROOT / "solutions"], draws=reference.draws, strict=trusted,
                              hidden_seed=settings.hidden_seed() if trusted else None,
                              job_extra={"catalogue": False, "mutant_follow": plan}, nice=nice)
        return FollowUp(lesson, reference, plan, child, trusted)

    def kill(self) -> None:
        """Stop the child and remove what it wrote (nothing joins the reference)."""
        self.child.kill_all()
        self.child.cleanup()

    def finish(self) -> list[str]:
        """Wait for the child, add what it probed whole to the reference (and its origin, and the disk cache)."""
        lesson, reference, plan, child = self.lesson, self.reference, self.plan, self.child
        try:
            child.wait()
            report = child.json("mutants.json")
            counts, died_in = _mutation_progress(report)
            if (child.death() or child.timed_out) and not died_in:
                return []  # the diagnosis stays with the facts; the next failing check tries again
            # (died_in: a candidate killed it; those before it stand, and it counts as broken)
            found = {k: v for k, v in _read_mutants(lesson, child).items()
                     if v is not None and not isinstance(v, _Unreadable)}
            seen_now = _read_screened(lesson, child)
        finally:
            child.cleanup()
        added = []
        for exercise, asked in plan.items():
            if not isinstance(counts.get(exercise), dict):
                continue
            now = counts[exercise]
            probed = _probed(report, exercise)
            if exercise in died_in and isinstance(now.get("at"), int):
                probed.add(now["at"])  # the candidate that killed it: broken, never again
            reached = [n for n in asked["candidates"] if not (exercise in died_in and n > now.get("at", -1))]
            for target in {id(r): r for r in (reference, reference.origin) if r is not None}.values():
                mine = mutation_entries(target.mistakes_of(exercise), exercise)
                for k, obs in sorted(found.items()):
                    if mutation_exercise(k) != exercise or k in mine:
                        continue
                    twin = next((o for o in mine.values() if _identical(obs["checks"], o["checks"])), None)
                    if twin is None:
                        target.mistakes[k] = mine[k] = dict(obs)
                    elif isinstance(twin.get("mutant"), dict) and isinstance(obs.get("mutant"), dict):
                        for said in (obs["mutant"], *(obs["mutant"].get("also") or ())):  # the checks cannot tell them apart
                            if isinstance(said, dict) and isinstance(said.get("sentence"), str):
                                add_alias(twin["mutant"], str(said.get("operator")), said["sentence"], said.get("n"))
                kept = target.screened(exercise)
                for n in reached:
                    if n in probed:
                        kept.pop(n, None)
                    elif n in seen_now.get(exercise, {}):
                        kept[n] = {**kept.get(n, {}), **seen_now[exercise][n]}
                target.mistakes[screened_key(exercise)] = {"checks": {}, "screened": kept}
                before = target.mutation.get(exercise, {})
                total = now.get("candidates", before.get("candidates", 0))
                nxt = max([before.get("next", 0) if isinstance(before.get("next"), int) else 0,
                           *(n + 1 for n in reached)])
                target.mutation[exercise] = {**before, **{c: before.get(c, 0) + now.get(c, 0)
                                                          for c in ("tried", "kept", "equivalent", "merged", "broken")},
                                             "candidates": total, "next": nxt, "skipped": max(0, total - nxt),
                                             "screened": len(kept), "done": True}
            added.append(exercise)
        _save_follow_up(lesson, reference, added)
        return added


def _rules_out(module, exercise: str, screen: tuple, seen: dict, reference: Reference) -> bool:
    """Does a screened candidate's cached observation on the screen's check rule it out for this student?"""
    from graders.engine.diagnosis import rules_out  # lazy: it imports torch (1-2 s); only a failing check asks

    s_key, s_obs = screen
    for check in module.CHECKS.of(exercise):
        for config in check.configs:
            if check.key(config) == s_key:
                r_obs = reference.exercises.get(exercise, {}).get("checks", {}).get(s_key, {})
                return rules_out(check, config, s_obs, seen[s_key], r_obs)
    return False


def _probed(report, exercise: str) -> set[int]:
    """The candidates a follow-up's child ran the whole battery on (or that broke), from its mutants.json."""
    got = report.get(exercise, {}).get("probed") if isinstance(report, dict) and \
        isinstance(report.get(exercise), dict) else None
    return {n for n in got[:1000] if isinstance(n, int)} if isinstance(got, list) else set()


def _read_screened(lesson: Lesson, child) -> dict:
    """What the follow-up's candidates gave on the screen's check: {exercise: {candidate: {check key: obs}}}."""
    found: dict = {}
    names = {e.name for e in lesson.exercises}
    for f in sorted(child.files.glob("screened-*.pt")):
        exercise, _, n = f.stem.removeprefix("screened-").rpartition("-")
        obs = _read_obs(f)
        if n.isdigit() and exercise in names and isinstance(obs, dict):
            found.setdefault(exercise, {})[int(n)] = obs["checks"]
    return found


def _save_follow_up(lesson: Lesson, reference: Reference, exercises: list[str]) -> None:
    """The followed-up exercises' mistakes, then the main file's counts, back to the cache (atomic renames; a
    check reading meanwhile sees the old files or the new, each whole)."""
    path = reference.path
    if path is None or not exercises or not path.exists():
        return
    of = _exercise_of(lesson)
    for exercise in exercises:
        _save_cached(_mistakes_path(path, exercise), {k: v for k, v in reference.mistakes.items() if of(k) == exercise})
    main = _load(path)
    if isinstance(main, dict) and isinstance(main.get("mutation"), dict):
        main["mutation"].update({e: reference.mutation[e] for e in exercises})
        _save_cached(path, main)


def _mistakes_path(path: Path, exercise: str) -> Path:
    """Where a cached reference (`path`) keeps `exercise`'s mistakes' observations."""
    return path.with_name(f"{path.stem}.mistakes-{exercise}.pt")


def _write_cache(lesson: Lesson, path: Path, data: dict, drawn: dict) -> None:
    """The reference's observations in the cache: each exercise's mistakes (the catalogue's and the mutants') in
    a file of their own, then the draws, then the main file last (its presence says the others are complete)."""
    of, names = _exercise_of(lesson), {e.name for e in lesson.exercises}
    own: dict[str, dict] = {}
    rest = {}
    for k, v in data["mistakes"].items():
        exercise = of(k)
        if exercise in names:
            own.setdefault(exercise, {})[k] = v
        else:
            rest[k] = v  # a mistake of no exercise here: read with the main file
    path.parent.mkdir(parents=True, exist_ok=True)
    for exercise, entries in own.items():
        _save_cached(_mistakes_path(path, exercise), entries)
    atomic.write_text(path.with_suffix(".draws.json"), json.dumps(drawn))
    _save_cached(path, {**data, "mistakes": rest, "split": sorted(own)})


def _exercise_of(lesson: Lesson):
    """The exercise a mistake's key belongs to: a catalogued mistake's, or a mutant's (mutations.exercise_of)."""
    catalogue = {m.id: m.exercise for m in getattr(__import__(lesson.module, fromlist=["MISTAKES"]), "MISTAKES", ())}
    return lambda k: catalogue.get(k) or mutation_exercise(k) or (k.removeprefix("screened:") if isinstance(k, str)
                                                                   and k.startswith("screened:") else None)


def _save_cached(target: Path, obj) -> None:
    """`obj` to a cache file: torch.save to memory, then an unpredictable name, renamed (no pid-named tmp)."""
    import torch  # lazy: 4.6 s here; whoever saves has judged or finished a reference, so imported it already

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic.write_bytes(target, buf.getvalue())


def _read_mistakes(path: Path) -> dict:
    """One exercise's mistakes from the cache: {} when the file is gone or is not that (the diagnosis then states
    facts only; the next check computes the reference afresh, since the main file is removed)."""
    data = _load(path)
    if isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("checks"), dict)
                                      for k, v in data.items()):
        return data
    main = path.with_name(path.name.split(".mistakes-")[0] + ".pt")
    main.unlink(missing_ok=True)
    return {}


def _mutation_progress(data) -> tuple[dict, list[str]]:
    """A reference child's mutants.json as counts per exercise, and the exercises whose probing it did not finish
    (it died on a candidate: that one counts as broken and the next follow-up starts after it)."""
    counts, died = _mutation_counts(data), []
    for exercise, c in counts.items():
        if c.get("done") is False and isinstance(c.get("at"), int) and isinstance(c.get("candidates"), int):
            died.append(exercise)
            c.update(broken=c.get("broken", 0) + 1, next=c["at"] + 1, skipped=max(0, c["candidates"] - c["at"] - 1))
    return counts, died


def _mutation_counts(data) -> dict:
    """mutants.json: {exercise: {count name: number}}, kept only when it is that (a report, never a verdict)."""
    if not isinstance(data, dict):
        return {}
    return {k: {c: v for c, v in counts.items() if isinstance(c, str) and isinstance(v, (int, float))}
            for k, counts in list(data.items())[:1000] if isinstance(k, str) and isinstance(counts, dict)}


def _read_draws(path: Path) -> dict:
    """A reference child's draws.json: {key: [[index, ...], ...]}; {} when absent or not that shape (the
    student's child then draws; engine/draws.py checks each entry again)."""
    try:
        data = readback.read_json(path, 4 * 2**20)
    except Exception:  # noqa: BLE001 - missing, too big, not JSON: drawn again
        return {}
    return data if isinstance(data, dict) else {}


class InProcess:
    """The runner for trusted code only (the course's solutions and its own mistakes, in tests): the child's own
    `run` (course_cli.sandboxed.child, graders.engine.runner) in this process, its files written to a temporary
    folder and read back as a sandboxed child's are. No sandbox, no time or memory limit the kernel enforces."""

    def __call__(self, module: str, cells: list[dict], exercises: list[str], device: str = "cpu",
                 mistakes: bool = False, only_public: bool = False, hidden_seed: int | None = None,
                 draws: dict | None = None, **_unsandboxed) -> "sandbox.Child":
        out = Path(tempfile.mkdtemp(prefix="course-inprocess-"))
        job = sandbox.make_job(module, cells, exercises, device, out, mistakes=mistakes, only_public=only_public,
                               hidden_seed=hidden_seed, draws=draws)
        job["in_process"] = True
        keyboard = builtins.input
        try:
            run_child(job)
        finally:
            builtins.input = keyboard  # the child's no-keyboard rule, for its run only
        return _Ran(_Exited(), out, float("inf"), None, job)


class _Exited:
    """What sandbox.Child needs of a process, for a run that already ended in this process."""

    pid, returncode = -1, 0

    def wait(self, timeout: float | None = None) -> int:
        return 0


class _Ran(sandbox.Child):
    """An in-process run's files, read back as a child's: nothing to kill, and a folder the course's own code
    wrote, removed in this process (no `rm` started: the fast tier's guard)."""

    def kill_all(self) -> None:
        pass

    def cleanup(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)


class Grading:
    """One grading in flight: `start` launches the children and returns at once; `finish` judges.
    (nbgrader's autograde starts one before its kernel runs the notebook, and finishes it after.)

    `runner` is where the student's notebook runs, the only thing a cold grading, a warm one and a test's differ
    in: `sandbox.start` (a fresh sandboxed child, the default), a warm server's `zygote.start` (a fork of the
    zygote: course_cli/sandboxed/warm.py), or `InProcess()` (this process, trusted code only). Each runs
    course_cli.sandboxed.child's `run` (graders.engine.runner) and is read back the same way. `reference`: the
    reference already at hand (a warm server keeps it in memory), else it is read or computed here."""

    def __init__(self, lesson: Lesson, cells: list[dict], notebook: str = "", exercises: list[str] | None = None,
                 only_public: bool = False, cwd: str | None = None, trusted: bool = False, runner=None,
                 reference: "Reference | None" = None, before_follow_up=None):
        only_public = only_public or registry.STUDENT_DISTRIBUTION  # the distribution ships the public references only
        self.lesson, self.cells, self.notebook, self.only_public, self.cwd = lesson, cells, notebook, only_public, cwd
        self.trusted = trusted
        self.runner = runner or sandbox.start
        self.before_follow_up = before_follow_up  # called with the exercises just before this grading follows up
        self.wanted = [e for e in lesson.exercises if exercises is None or e.name in exercises]
        self.names = [e.name for e in self.wanted]
        self.reference, self.ref_path = reference, None
        if reference is None:
            # The reference is finished before any student child starts (a cold cache costs that once), so no
            # student code runs while reference observations are being written anywhere.
            ref_path, ref_child = Reference.start(lesson, "cpu", trusted, runner=self.runner)
            self.reference = Reference.finish(lesson, ref_path, ref_child, "cpu") if ref_child is not None else None
            self.ref_path = ref_path
        self.student = self._start_student("cpu")

    def _start_student(self, device: str):
        visible, env = visible_solutions(self.lesson), {}
        if not self.trusted and self.cwd:
            # your own folder, for `import_lesson(..., mine=True)` (and the student distribution's import_lesson)
            visible.append(Path(self.cwd))
            env["COURSE_WORKSPACE"] = str(self.cwd)
        drawn = getattr(self.reference, "draws", {}) if self.reference is not None else \
            Reference.draws_at_hand(self.lesson, self.ref_path, "cpu")
        return self.runner(self.lesson.module, self.cells, self.names, device, only_public=self.only_public,
                           cwd=self.cwd, visible=visible, strict=self.trusted, extra_env=env,
                           hidden_seed=settings.hidden_seed() if self.trusted else None, draws=drawn)

    def finish(self) -> LessonResult:
        lesson, cells, names, student = self.lesson, self.cells, self.names, self.student
        module = __import__(lesson.module, fromlist=["CHECKS"])  # imports torch while the children work
        reference = self.reference or Reference.finish(lesson, self.ref_path, None, "cpu")
        try:
            student.wait()
            student.raise_if_never_started()  # an error for the grader, never the student's 0
            obs = {n: _read_obs(student.files / f"obs-{n}.pt") for n in names}
            obs = {n: _as_errors(module, n, o) if isinstance(o, _Unreadable) else o for n, o in obs.items()}
            gpu = cuda_available()
            if gpu and any(c.device == "cuda" for check in module.CHECKS for c in check.configs):
                self._add_gpu(obs, reference)
            result = _judge(lesson, module, student, obs, gpu, reference, cells, self.notebook, self.wanted,
                            self.only_public)
            status = {r.id: r.status for r in result.exercises}
            unnamed = [r.id for r in result.exercises if r.status in ("failed", "error")
                       and not is_cause(r.diagnosis_id) and reference.unprobed(r.id)
                       and all(status.get(d, "passed") == "passed" for d in lesson.exercise(r.id).depends)]
            # (an exercise whose part fails too is told "fix X first": its own candidates would not explain it)
            if unnamed and settings.follow_ups() and lesson.solution_path.exists():
                if self.before_follow_up is not None:
                    self.before_follow_up(unnamed)
                followed = follow_up(lesson, reference, unnamed, screens(module, obs, result, unnamed), self.trusted)
            else:
                followed = []
            if followed:
                result = _judge(lesson, module, student, obs, gpu, reference, cells, self.notebook, self.wanted,
                                self.only_public)
            if self.only_public:
                result.notes.append(PUBLIC_ONLY_NOTE)
            if not student.sandboxed and self.trusted:
                result.notes.append("graded WITHOUT the sandbox (--insecure): this notebook's code ran as the "
                                    "grader's own user, with its files and network")
            return result
        finally:
            student.kill_all()
            student.cleanup()

    def _add_gpu(self, obs: dict, reference: "Reference") -> None:
        """GPU probes run in a second child: without TRITON_INTERPRET, without the address-space limit."""
        lesson, names = self.lesson, self.names
        g_path, g_child = Reference.start(lesson, "cuda", self.trusted, runner=self.runner)
        g_reference = Reference.finish(lesson, g_path, g_child, "cuda")
        g_student = self._start_student("cuda")
        g_student.wait()
        g_student.raise_if_never_started()
        for n in names:
            g = _read_obs(g_student.files / f"obs-{n}.pt")
            g = None if isinstance(g, _Unreadable) else g
            if obs[n] is not None and g is not None and not obs[n].get("missing"):
                obs[n]["checks"].update(g["checks"])
                obs[n]["forbidden"] = sorted(set(obs[n]["forbidden"]) | set(g["forbidden"]))
            reference.exercises[n]["checks"].update(g_reference.exercises[n]["checks"])
        reference.read_all()
        for m, m_obs in g_reference.read_all().mistakes.items():
            if m in reference.mistakes:
                reference.mistakes[m]["checks"].update(m_obs["checks"])
        g_student.cleanup()


def grade_cells(lesson: Lesson, cells: list[dict], notebook: str = "", exercises: list[str] | None = None,
                only_public: bool = False, cwd: str | None = None, trusted: bool = False,
                runner=None) -> LessonResult:
    """Grade code cells (as `graded_cells` returns them) against the lesson's reference (`runner`: Grading's)."""
    return Grading(lesson, cells, notebook, exercises, only_public, cwd, trusted, runner).finish()


def _judge(lesson, module, student, all_obs, gpu, reference, cells, notebook, wanted, only_public) -> LessonResult:
    """Gather what the children left and let graders/engine/verdict.py decide."""
    from graders.engine.verdict import StudentRun, judge_lesson  # lazy: verdict imports torch (4.9 s cold here)

    run = StudentRun(all_obs, _cell_reports(student), student.death(), bool(student.timed_out))
    return judge_lesson(lesson, module, run, reference.exercises, reference.mistakes_of, cells, notebook, wanted, gpu,
                        only_public)


def grade_notebook(lesson: Lesson, path: str | Path, exercises: list[str] | None = None,
                   only_public: bool = False, trusted: bool = False, root: str | Path | None = None,
                   runner=None) -> LessonResult:
    """Grade one notebook file, read as a submission inside `root` (default: its folder; see
    notebook.submission_bytes). A notebook that cannot be read, or is refused, is NOT GRADED with why.
    `runner`: where its code runs (Grading's; a fresh sandboxed child by default)."""
    try:
        nb = read_notebook(path, root)
    except NotebookError as exc:
        from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

        return error_result(lesson, str(path), str(exc), not_graded=True)
    return grade_cells(lesson, graded_cells(nb), str(path), exercises, only_public, cwd=str(Path(path).resolve().parent),
                       trusted=trusted, runner=runner)


def run_benchmark(lesson: Lesson, path: str | Path) -> list[dict]:
    """Run the lesson's `benchmark(ns, device)` on a notebook's code, on the CPU and on CUDA if present."""
    module = __import__(lesson.module, fromlist=["CHECKS"])
    if not hasattr(module, "benchmark"):
        raise LookupError(f"{lesson.id} has no benchmark")
    try:
        cells = graded_cells(read_notebook(path))
    except NotebookError as exc:
        raise RuntimeError(str(exc)) from None
    reports = []
    for device in ("cpu", "cuda"):
        child = sandbox.start(lesson.module, cells, [], device, bench=True, cwd=str(Path(path).resolve().parent),
                              exercise_timeout=600).wait()
        try:
            if child.death():
                raise RuntimeError(f"the benchmark did not finish: {child.death()}")
            report = child.json("bench.json") or {}
            report.setdefault("title", f"{lesson.id} on {device}")
            reports.append(report)
            if not cuda_available():
                break
        finally:
            child.cleanup()
    return reports
