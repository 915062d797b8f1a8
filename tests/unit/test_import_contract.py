"""The import contract (design.md invariants 3, 7 and 9), on tests/unit/test_imports.py's walk of every import,
at module level and inside functions:

1. the child's side: the modules that run in the sandboxed child import only each other (CHILD), never one that
   judges, reads a child back or starts one (JUDGING names them; anything outside CHILD fails too);
2. layers: a module imports only from its own layer or a lower one (LAYERS, top first): the CLI's commands,
   then the student's, class and instructor rooms, then the terminal output, then the sandbox, then the shared
   settings and text rules, then the graders (registry, lessons), then the engine. So `graders` never imports
   `course_cli`, no lesson module imports the CLI, and the engine knows no lesson;
3. the exceptions still open are listed (KNOWN), each with its reason, and each must still exist (one that is
   fixed must leave the list);
4. the sandbox (`course_cli.sandboxed`) reaches no room above it, not even through a KNOWN exception: its callers
   hand it what it needs (the warm server's workspace: `warm.grade_notebook(..., workspace=)`).
"""

from __future__ import annotations

from test_imports import graph

# Every module that runs in the sandboxed child (cold or forked by the warm zygote) and what they import.
CHILD = {
    "course_cli.sandboxed.child",   # the child's main: its seat (limits, guard, files) around the runner
    "course_cli.sandboxed.zygote",  # the warm sandbox: forks the child
    "course_cli.settings",          # the environment's switches (COURSE_SANDBOXED); the standard library only
    "graders.engine",               # the lesson author's API (its names resolve on first use)
    "graders.engine.runner",        # the one function: a notebook's cells, then its probes
    "graders.engine.probe",         # probes, the recorder, observations as plain data
    "graders.engine.draws",         # examples drawn over a declared domain
    "graders.engine.notebook",      # which cells are graded
    "graders.engine.checks",        # declarations (checks, configs, mistakes)
    "graders.engine.compare",       # tolerances (a probe's own comparisons)
    "graders.triton_compat",        # Triton's interpreter under NumPy >= 2.4
}
# What judges, reads a child back or starts one: the parent's side. None of it may be reached from CHILD.
JUDGING = {
    "graders.engine.judges", "graders.engine.verdict", "graders.engine.diagnosis", "graders.engine.scoring",
    "graders.engine.kinds", "graders.engine.mistakes", "graders.engine.results",
    "course_cli.sandboxed.grading", "course_cli.sandboxed.readback", "course_cli.sandboxed.sandbox",
    "course_cli.sandboxed.warm", "course_cli.sandboxed.references", "course_cli.sandboxed.child_build",
}

LAYERS = [  # top first; a module's layer is the longest prefix listed
    {"course_cli.main", "course_cli.__main__", "course_cli.incell", "course_cli.kernel_warm"},
    {"course_cli.student", "course_cli.classes", "course_cli.instructor"},
    {"course_cli.render", "course_cli.figures"},
    {"course_cli.sandboxed"},
    {"course_cli.settings", "course_cli.safe_text", "course_cli"},
    {"graders"},
    {"graders.engine", "graders.triton_compat"},  # (the compat shim is the child's, and knows no lesson)
]

KNOWN = {  # (importer, imported): why it is still there
    ("graders.engine.mistakes", "graders.registry"):
        "a mistake given as edits reads its lesson's solved notebook by id (the registry); the lesson module "
        "should hand the engine its solved cell",
}


def layer_of(module: str) -> int:
    best, found = -1, len(LAYERS)
    for i, names in enumerate(LAYERS):
        for prefix in names:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    return found


def closure(g: dict[str, set[str]], start: set[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for dep in g.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


# Edges from the child's side that only the REFERENCE child takes (job["mistakes"]: trusted code, the solved
# notebook and the engine's edits of it), never a student's child: why each is there.
REFERENCE_ONLY = {
    ("course_cli.sandboxed.child", "graders.engine.mutations"):
        "the reference child probes the engine's mutants of the solved cell (and drops the equivalent ones, which "
        "takes a judge); a student's child never reaches _probe_mutants",
}


def student_side(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph less the REFERENCE_ONLY edges: what a student's child can reach."""
    return {m: {d for d in deps if (m, d) not in REFERENCE_ONLY} for m, deps in g.items()}


def child_violations(g: dict[str, set[str]]) -> list[str]:
    """Imports from a CHILD module to anything outside CHILD (and so to every JUDGING one)."""
    g = student_side(g)
    return sorted(f"{m} imports {d}" + (" (it judges)" if d in JUDGING else "")
                  for m in CHILD for d in g.get(m, ()) if d not in CHILD)


def layer_violations(g: dict[str, set[str]]) -> list[str]:
    """Imports from a lower layer to a higher one, less the KNOWN ones."""
    return sorted(f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})"
                  for m, deps in g.items() for d in deps
                  if layer_of(d) < layer_of(m) and (m, d) not in KNOWN)


def test_the_child_imports_only_the_child_s_modules():
    g = graph()
    assert CHILD <= set(g) and JUDGING <= set(g)  # every name in the lists is a module
    assert not CHILD & JUDGING
    assert child_violations(g) == []
    assert not closure(student_side(g), CHILD) & JUDGING


def test_every_import_goes_down_the_layers():
    assert layer_violations(graph()) == []


def test_graders_never_import_course_cli_and_no_lesson_imports_the_cli():
    g = graph()
    assert {m: sorted(d for d in deps if d.startswith("course_cli"))
            for m, deps in g.items() if m.startswith("graders") and any(d.startswith("course_cli") for d in deps)} == {}


ROOMS = ("course_cli.student", "course_cli.classes", "course_cli.instructor", "course_cli.main", "course_cli.incell",
         "course_cli.kernel_warm", "course_cli.render", "course_cli.figures")


def sandbox_reaches_rooms(g: dict[str, set[str]]) -> list[str]:
    """Every room above the sandbox that a `course_cli.sandboxed` module imports, at module level or inside a
    function, directly or through other modules (KNOWN or not)."""
    start = {m for m in g if m.startswith("course_cli.sandboxed")}
    return sorted(m for m in closure(g, start) if m.startswith(ROOMS))


def test_the_sandbox_never_reaches_a_room_above_it():
    assert sandbox_reaches_rooms(graph()) == []
    assert not [k for k in KNOWN if k[0].startswith("course_cli.sandboxed")]  # nor may one be excepted


def test_each_known_exception_still_exists():
    g = graph()
    assert [k for k in KNOWN if k[1] not in g.get(k[0], ())] == []  # fixed: take it off KNOWN


def test_the_contract_catches_what_it_forbids():
    """Each rule fails on a graph that breaks it (so a blind walk cannot pass)."""
    g = graph()
    assert child_violations({**g, "graders.engine.runner": g["graders.engine.runner"] | {"graders.engine.verdict"}}) \
        == ["graders.engine.runner imports graders.engine.verdict (it judges)"]
    bad = {**g, "graders.lesson01_sdpa": g["graders.lesson01_sdpa"] | {"course_cli.main"},
           "graders.engine.probe": g["graders.engine.probe"] | {"graders.lesson01_sdpa"}}
    assert layer_violations(bad) == ["graders.engine.probe (layer 6) imports graders.lesson01_sdpa (layer 5)",
                                     "graders.lesson01_sdpa (layer 5) imports course_cli.main (layer 0)"]
    assert layer_violations({**g, "course_cli.sandboxed.sandbox": {"course_cli.classes.batch"}}) == \
        ["course_cli.sandboxed.sandbox (layer 3) imports course_cli.classes.batch (layer 1)"]
    # the edge this contract once excepted (the warm client finding the student's workspace) fails both rules
    back = {**g, "course_cli.sandboxed.warm": g["course_cli.sandboxed.warm"] | {"course_cli.student.workspace"}}
    assert layer_violations(back) == \
        ["course_cli.sandboxed.warm (layer 3) imports course_cli.student.workspace (layer 1)"]
    assert "course_cli.student.workspace" in sandbox_reaches_rooms(back)
