"""What of the graders a child may read: a lesson's grader module stripped of its hidden checks or its mistakes'
code (the student distribution, `course pack`), and the child build a student's sandboxed child is given instead
of the real `graders/` (every probe, public and hidden; no mistake; no later lesson), compiled to bytecode when
built (the sandbox binds it read-only)."""

from __future__ import annotations

import ast
import compileall
import importlib
import shutil
from pathlib import Path

from graders.registry import LESSONS, ROOT

def _hidden_probe(node: ast.stmt) -> bool:
    """A probe registered with `@CHECKS.probe(..., hidden=True)`: since hidden checks add inputs, never properties
    (graders/engine/checks.py), that is a public check and its hidden twin. The distribution keeps the public one:
    `hidden=True` is taken out of the decorator (in place), and the probe stays. Returns whether it was there."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    found = False
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "probe":
            kept = [kw for kw in dec.keywords
                    if not (kw.arg == "hidden" and isinstance(kw.value, ast.Constant) and kw.value.value is True)]
            found |= len(kept) != len(dec.keywords)
            dec.keywords = kept
            if len(dec.args) > 4 and isinstance(dec.args[4], ast.Constant) and dec.args[4].value is True:
                dec.args = dec.args[:4]
                found = True
    return found


def _registers(node: ast.stmt) -> bool:
    """A statement that may register something with the lesson's checks (a probe, a battery): it stays."""
    parts = (node.decorator_list if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             else [node.value] if node.value is not None else [])
    return any(isinstance(n, ast.Name) and n.id == "CHECKS" for part in parts for n in ast.walk(part))


def _private_definition(node: ast.stmt) -> str | None:
    """The name a module-level `def _f`, `class _C` or `_x = ...` binds, if it is private and registers nothing."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        name = node.name
    elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name = node.targets[0].id
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        name = node.target.id
    else:
        return None
    if not name.startswith("_") or name.startswith("__") or _registers(node):
        return None
    return name


def drop_unreferenced(body: list[ast.stmt], keep: frozenset[str] = frozenset()) -> list[ast.stmt]:
    """Dead code out: the module's private functions, classes and values that nothing left in the module
    reaches (nor another shipped module imports: `keep`). Everything else in the module is a root; a private
    definition is live once a live statement names it, and the marking runs to a fixed point, so what only
    a hidden probe or a mistake's code used goes, with what only it used, and so on (cycles included).
    A private name bound twice stays, whatever refers to it."""
    defined = {i: name for i, node in enumerate(body) if (name := _private_definition(node)) is not None}
    twice = {name for name in defined.values() if list(defined.values()).count(name) > 1}
    refs = [{n.id for n in ast.walk(node) if isinstance(n, ast.Name)} for node in body]
    live = {i for i in range(len(body)) if i not in defined or defined[i] in twice | keep}
    named: set[str] = set()
    frontier = set(live)
    while frontier:
        for i in frontier:
            named |= refs[i]
        frontier = {i for i, name in defined.items() if name in named and i not in live}
        live |= frontier
    return [node for i, node in enumerate(body) if i in live]


def strip_grader(source: str, mistakes, keep: frozenset[str] = frozenset(), keep_hidden: bool = False,
                 keep_mistakes: bool = True) -> str:
    """A lesson's grader module without its hidden checks (a hidden check's public twin stays; keep_hidden: the
    sandboxed child's build of the graders keeps the twins too), without its mistakes' code (keep_mistakes=False:
    without the mistakes at all, messages included), and without the private helpers that only those used
    (`keep`: the names other shipped
    modules import from it)."""
    tree = ast.parse(source)
    impl_names = {m.impl.__name__ for m in mistakes if getattr(m, "impl", None) is not None}
    body = []
    for node in tree.body:
        if not keep_hidden:
            _hidden_probe(node)  # the distribution: its public check stays, without the hidden twin
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in impl_names:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "MISTAKES" for t in targets):
                if not keep_mistakes:
                    body.append(ast.parse("MISTAKES = ()").body[0])
                    continue
                entries = ", ".join(f"Mistake({m.exercise!r}, {m.id!r}, {m.message!r}, observed=True"
                                    + (f", hint={m.hint!r})" if getattr(m, "hint", "") else ")") for m in mistakes)
                body.append(ast.parse(f"MISTAKES = ({entries}{',' if len(mistakes) == 1 else ''})").body[0])
                continue
        body.append(node)
    tree.body = drop_unreferenced(body, keep)
    text = ast.unparse(tree)
    if "Mistake" in text and "import Mistake" not in text and " Mistake," not in text and ", Mistake" not in text:
        text = "from graders.engine import Mistake\n" + text
    return text + "\n"


def _imported_names(files) -> dict[str, frozenset[str]]:
    """For each graders module, the names other modules import from it (`from .lesson08_gpt import _gap_at_k`)."""
    out: dict[str, set[str]] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                stem = node.module.rsplit(".", 1)[-1]
                out.setdefault(stem, set()).update(a.name for a in node.names)
    return {stem: frozenset(names) for stem, names in out.items()}


def _lesson_closure(graders: Path, stem: str) -> set[str]:
    """The lesson modules `stem` imports (`from .lesson08_gpt import _gap_at_k`), transitively, and itself."""
    import re

    seen, todo = set(), [stem]
    while todo:
        cur = todo.pop()
        if cur in seen or not (graders / f"{cur}.py").exists():
            continue
        seen.add(cur)
        todo += re.findall(r"(lesson\d\d_\w+)", (graders / f"{cur}.py").read_text(encoding="utf-8"))
    return seen


def _refuse_untrusted(cache: Path, dest: Path) -> None:
    """The graders a child sees are the checks themselves: the cache's folder must be the user's (or root's)
    and not writable by others (unless sticky), and a built folder already at `dest` a real folder of the
    user's that only they can write, holding a regular `.complete`; else ChildBuildUntrusted naming it. (Its
    name is predictable: another user who could plant it would choose what every check says.)"""
    import os
    import stat

    uid = os.geteuid()
    st = os.stat(cache)
    if st.st_uid not in (uid, 0) or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
        raise ChildBuildUntrusted(f"the course's cache {cache} is writable by other users (or not yours): "
                                  f"the graders a sandboxed check sees are never built there; set "
                                  f"COURSE_CACHE_DIR to a folder of your own")
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return
    try:
        done = stat.S_ISREG(os.lstat(dest / ".complete").st_mode)
    except OSError:
        done = False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022 or not done:
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode)
                else f"owned by uid {st.st_uid}, mode {st.st_mode & 0o777:o}")
        raise ChildBuildUntrusted(f"{dest} ({what}) is not a build of the graders that this user made: it is not "
                                  f"used; remove it (or set COURSE_CACHE_DIR to a folder of your own)")


class ChildBuildUntrusted(RuntimeError):
    """A child build in the cache that its user did not make (or could have been replaced): never used, and
    nobody is graded (sandbox._child_build raises it as SandboxFailed: an error, never a score)."""


def child_build(cache: Path, lesson=None) -> Path:
    """The graders as a student's sandboxed child sees them: every probe, public and hidden, and nothing of
    the answers: no catalogued mistake (their `edits` quote the solved cells, their `impl` is solved code with
    a slip, their messages name the fix; the reference child alone observes them, from the real graders) and
    none of the private helpers only those used. (The probes' own test doubles stay: lesson 10's RoPE, lesson
    08's toy model, lesson 02's reference mask; they coincide with a few solved lines, listed in
    tests/e2e/test_child_build.py.) Built once per version of graders/ into `cache`/child-graders-KEY/
    (atomically); returns the folder to bind in place of graders/. With `lesson`, only that lesson's grader
    module and those it imports are in it: never a later lesson's."""
    import hashlib
    import os
    import tempfile

    src = ROOT / "graders"
    files = sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256(b"child-build-4" + (lesson.id.encode() if lesson is not None else b""))
    for f in files:
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes())
    dest = Path(cache) / f"child-graders-{lesson.id + '-' if lesson is not None else ''}{h.hexdigest()[:20]}"
    Path(cache).mkdir(mode=0o700, parents=True, exist_ok=True)
    _refuse_untrusted(Path(cache), dest)
    if (dest / ".complete").exists():
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=".child-graders-", dir=cache))
    shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    imported = _imported_names([*tmp.rglob("*.py"), *(ROOT / "course_cli").rglob("*.py")])
    wanted = _lesson_closure(src, f"{lesson.id}_{lesson.slug}") if lesson is not None else None
    for other in LESSONS:
        f = tmp / f"{other.id}_{other.slug}.py"
        if wanted is not None and f.stem not in wanted:
            f.unlink(missing_ok=True)  # a lesson this one does not build on: not in view at all
            continue
        module = importlib.import_module(other.module)
        f.write_text(strip_grader(f.read_text(encoding="utf-8"), getattr(module, "MISTAKES", ()),
                                  keep=imported.get(f.stem, frozenset()), keep_hidden=True, keep_mistakes=False))
    # Compiled here, once: the sandbox binds the build read-only, so a child could never write its bytecode and
    # compiled every module it imports at each start (about 0.1 CPU-s of a cold check's child)
    compileall.compile_dir(str(tmp), quiet=2)
    (tmp / ".complete").write_text("")
    try:
        os.rename(tmp, dest)
    except OSError:  # another grader built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
