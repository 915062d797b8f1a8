"""What a student's sandboxed child can read holds no answer (issue 30, item 2): no solved line of the graded
lesson or a later one, no catalogued mistake's edit or code.

The needles: every non-trivial line of the solved notebooks (at least 20 characters, not a comment, not in
the lesson's student notebook), of the graded lesson and the later ones, every line of their mistakes' `edits` (both sides, at least 12 characters) and
of its `impl`, minus what the course hands students anyway (the student notebooks and the hints). The known
exceptions are the probes' own test doubles, which a check needs in the child (KNOWN below: each is a line
the grader's own code shares with a solution); anything else found fails.

The haystack: the child build of the graders (fast test), and, in the slow test, every file a lesson-01
student's child can open, walked from inside the sandbox (all but the system's /usr, /proc, /sys, /dev, the
standard library and the site-packages folders, and the child's own output folder)."""

from __future__ import annotations

import functools
import importlib
import inspect
import json

import nbformat
import pytest
from pathlib import Path

from course_cli.sandboxed.child_build import child_build
from course_cli.sandboxed import sandbox
from graders.registry import LESSONS, find_lesson
from harness import set_limit

# (graded lesson's grader module, line) the probes' test doubles share with a solution or a mistake's text
KNOWN = {
    ("lesson02_masks", "tril(diagonal=t_k - t_q)"),  # the hidden KV-cache check's reference mask
    ("lesson02_masks", "k.transpose(-2, -1)"),
    ("lesson03_heads", "is_causal=is_causal)"), ("lesson03_heads", "is_causal=False)"),
}
GENERIC = {"if cache is not None:", "k.transpose(-2, -1)", "softmax(scores, dim=-1)", "masked_fill(~mask,",
           "self.window = window", "pos = torch.arange(T, device=idx.device)", "if mask is not None:",
           "return total"}  # idioms, in any attention code


def _code_lines(path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [l.strip() for c in nb.cells if c.cell_type == "code" for l in c.source.splitlines()]


@functools.lru_cache(maxsize=None)
def needles(from_number: int = 1) -> dict[str, str]:
    public = " ".join(h for l in LESSONS for e in l.exercises for h in e.hints)
    public += " ".join(" ".join(_code_lines(l.student_path)) for l in LESSONS)
    out: dict[str, str] = {}
    for l in LESSONS:
        stub = set(_code_lines(l.student_path))
        if l.number < from_number:  # an earlier lesson: the graded one may build on it
            continue
        for line in _code_lines(l.solution_path):
            if len(line) >= 20 and not line.startswith("#") and line not in stub:
                out[line] = f"{l.id} solution"
        for m in getattr(importlib.import_module(l.module), "MISTAKES", ()):
            texts = [t for pair in m.edits for t in pair]
            if m.impl is not None:
                texts.append(inspect.getsource(m.impl))
            for t in texts:
                for line in t.splitlines():
                    line = line.strip()
                    if len(line) >= 12 and not line.startswith(("#", "def ", '"""')) and line not in stub:
                        out[line] = f"{l.id} mistake {m.id}"
    return {n: why for n, why in out.items() if n not in public}


@pytest.mark.slow
@pytest.mark.parametrize("lesson", [l.id for l in LESSONS])
def test_the_child_build_holds_no_answer(tmp_path, lesson):
    L = find_lesson(lesson)
    build = child_build(tmp_path / "cache", L)
    found, wanted = [], needles(L.number)
    for f in build.rglob("*"):
        if f.is_file() and f.suffix != ".pyc":  # (each bytecode file is its sibling source's, checked below)
            text = f.read_text(encoding="utf-8", errors="replace")
            found += [(f.stem, n, why) for n, why in wanted.items() if n in text]
    # compiled at build time (the sandbox binds the build read-only: a child could never write it): one fresh
    # bytecode file per source, compiled from that source (its recorded mtime and size), and none other
    import importlib.util

    sources = sorted(build.rglob("*.py"))
    assert sorted(build.rglob("*.pyc")) == sorted(Path(importlib.util.cache_from_source(str(f))) for f in sources)
    for f in sources:
        head = Path(importlib.util.cache_from_source(str(f))).read_bytes()[:16]
        st = f.stat()
        assert (int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")) == \
            (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF), f
    later = [l for l in LESSONS if l.number > L.number]
    assert not [f for f in build.rglob("*.py") for l in later if f.stem == f"{l.id}_{l.slug}"]
    unexpected = [(s, n, why) for s, n, why in found if (s, n) not in KNOWN and n not in GENERIC]
    assert not unexpected, unexpected
    module = (build / f"{L.id}_{L.slug}.py").read_text()
    assert "MISTAKES = ()" in module and "edits=" not in module


WALK = '''
import json, os, sys, sysconfig, site
NEEDLES = json.loads({needles!r})
out = json.load(open(sys.argv[1]))["out"]
skip = {{"/usr", "/proc", "/sys", "/dev", "/tmp", out, os.path.realpath(sysconfig.get_path("stdlib"))}}
skip |= {{os.path.realpath(p) for p in site.getsitepackages()}}
found, files, ipynbs = set(), 0, []
for top, dirs, names in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
    for n in names:
        p = os.path.join(top, n)
        if n.endswith(".ipynb"):
            ipynbs.append(p)
        try:
            if os.path.getsize(p) > 4 << 20:
                continue
            text = open(p, errors="replace").read()
        except OSError:
            continue
        files += 1
        found |= {{k for k in NEEDLES if k in text}}
report = "WALKED %d files; ipynb %s; FOUND %s" % (files, sorted(ipynbs), sorted(found))
def softmax(x, dim=-1):
    raise RuntimeError(report)
'''


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.bwrap_status()[0], reason="needs bubblewrap")
@pytest.mark.parametrize("forked", [False, True], ids=["cold", "forked from a class zygote"])
def test_a_student_child_can_read_no_answer(tmp_path, monkeypatch, forked):
    from course_cli.sandboxed import class_forks
    from course_cli.sandboxed.grading import grade_notebook

    set_limit(monkeypatch, "cell_timeout", 240.0)  # it reads every file it can

    L = find_lesson("lesson01")
    wanted = needles(L.number)
    nb = nbformat.read(L.student_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(WALK.format(needles=json.dumps(sorted(wanted)))))
    (tmp_path / "nb").mkdir()
    path = tmp_path / "nb" / L.notebook
    nbformat.write(nb, path)
    if forked:  # as class grading forks it (course grade, nbgrader): the zygote shows what a cold child sees
        if not class_forks.usable():
            pytest.skip("class zygotes need pidfds (Linux)")
        zygote = class_forks.take(L)
        try:
            result = grade_notebook(L, path, trusted=True, runner=zygote.runner)
        finally:
            class_forks.give(zygote)
            class_forks.stop_all()
    else:
        result = grade_notebook(L, path, trusted=True)
    text = json.dumps(result.to_dict())
    assert "WALKED" in text, result.notes
    report = next(c.message for e in result.exercises for c in e.checks if "WALKED" in c.message)
    files = int(report.split("WALKED ")[1].split(" ")[0])
    assert files > 20, report[:500]  # it did read the course code (graders/, course_cli/)
    ipynbs = report.split("ipynb ")[1].split("; FOUND")[0]
    assert ipynbs == "[]", ipynbs  # no solved notebook in view (lesson 01 builds on none)
    found = set(json.loads(report.split("FOUND ")[1].split("\n")[0].replace("'", '"')))
    assert found <= GENERIC, found - GENERIC  # idioms only


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.bwrap_status()[0], reason="needs bubblewrap")
def test_mistakes_are_still_diagnosed_from_the_reference(tmp_path):
    """The student's child has no mistakes: the diagnosis comes from the reference child's observations."""
    from harness import with_mistake

    from course_cli.sandboxed.grading import grade_notebook

    L = find_lesson("lesson01")
    module = importlib.import_module(L.module)
    path = with_mistake(L, next(m for m in module.MISTAKES if m.id == "k_T"), tmp_path)
    result = grade_notebook(L, path, trusted=True)
    ex = next(e for e in result.exercises if e.id == "scaled_dot_product_attention")
    assert ex.diagnosis and "transpose" in ex.diagnosis, (ex.status, ex.diagnosis)
