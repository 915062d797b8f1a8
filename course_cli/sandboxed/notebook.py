"""Reading a notebook for grading, with a student-facing message for every way it can be unreadable.

Which of its cells the grader runs, and which cell defines a name, are the notebook rules of
graders/engine/notebook.py (re-exported here for the CLI's modules).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
import warnings
from pathlib import Path

from graders.engine.notebook import defining_cell, graded_cells, is_demo, is_test  # noqa: F401 (re-exported)


class NotebookError(Exception):
    """A notebook that cannot be graded at all; the message says why, for a student."""


class SubmissionRefused(NotebookError):
    """A submission that is not a regular file inside its root, or breaks a bound: NOT GRADED, with why."""


# The bounds of the grader's own steps before any sandbox (docs/architecture.md, "What a submission is").
# The largest notebook the course ships, with its outputs, is solutions/lesson10_llama.ipynb: 479 KB, 65 cells,
# JSON nested 7 deep.
MAX_BYTES = 16 * 2**20  # apparent size, size on disk and bytes read: ~35x the largest real notebook
MAX_CELLS = 2000        # ~30x the most cells of a lesson (65)
MAX_DEPTH = 64          # JSON nesting (a notebook's own structure is 7 deep; outputs' JSON data a few more)
MAX_CONTAINERS = 100_000  # JSON objects and arrays in all (lesson10's solution has ~1,500): bounds validation
MAX_SECONDS = 20.0      # reading, parsing and validating one submission in the grader's process


def _refuse(p, why: str) -> SubmissionRefused:
    return SubmissionRefused(f"{p} {why}")


def can_read(uid: int, st: os.stat_result) -> bool:
    """Whether user `uid` may read the file `st` by its mode bits (owner, group through their groups as the
    password database lists them, others); root may read anything."""
    if uid == 0 or st.st_mode & 0o004 or (st.st_uid == uid and st.st_mode & 0o400):
        return True
    if not st.st_mode & 0o040 or st.st_uid == uid:
        return False
    try:
        import pwd

        who = pwd.getpwuid(uid)
        return st.st_gid in os.getgrouplist(who.pw_name, who.pw_gid)
    except (KeyError, OSError):  # a uid with no entry: nothing is known of its groups
        return False


def hard_link_refusal(st: os.stat_result, owner: int) -> str | None:
    """Why a regular file `st` with several names (st_nlink > 1) found in a folder of user `owner` (the
    student's) is refused, or None: refused when `owner` could not read it (`can_read`), since that name then
    reaches a file they had no right to (the kernel's protected_hardlinks off, or a file made readable then
    taken back). A file with one name, or one they could read, is theirs to submit."""
    if st.st_nlink <= 1 or can_read(owner, st):
        return None
    return (f"a hard link ({st.st_nlink} names) to a file of uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}, "
            f"that the folder's owner (uid {owner}) cannot read")


def submission_bytes(path: str | Path, root: str | Path | None = None) -> bytes:
    """The bytes of the submission at `path`, which must be a regular file inside `root` (default: its own
    folder), opened without following any link: every folder from `root` down is opened with O_NOFOLLOW
    relative to the one above it, then the file itself (O_NOFOLLOW|O_NONBLOCK, so a FIFO cannot block the
    open), and fstat on that descriptor decides: a link, a FIFO, a device, a socket or a folder is refused, as
    is a file whose apparent size or size on disk exceeds MAX_BYTES; at most MAX_BYTES are read. `root`
    itself is the grader's (the class folder, the submission folder) and is opened as given. A file with more
    than one name (a hard link) is refused like a link when the owner of the folder holding it could not read
    it (`hard_link_refusal`: a hard link to the instructor's solved notebook, to a classmate's private one);
    one they could read is a second name of their own. Raises SubmissionRefused (or NotebookError when there
    is simply nothing there)."""
    p = Path(os.path.abspath(path))
    base = Path(os.path.abspath(root)) if root is not None else p.parent
    try:
        rel = p.relative_to(base)
    except ValueError:
        raise _refuse(p, f"is outside the submission's folder {base}: not graded") from None
    parts = rel.parts
    if not parts:
        raise _refuse(p, "is the submission's folder itself, not a notebook")
    fds = []
    try:
        try:
            fds.append(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except FileNotFoundError:
            raise NotebookError(f"no notebook at {p}") from None
        except OSError as exc:
            raise NotebookError(f"{base} cannot be opened: {exc.strerror}") from None
        for i, part in enumerate(parts[:-1]):
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
            except FileNotFoundError:
                raise NotebookError(f"no notebook at {p}") from None
            except OSError as exc:  # ELOOP/ENOTDIR: a link (or a file) where a folder should be
                where = base.joinpath(*parts[:i + 1])
                kind = "a symbolic link" if os.path.islink(where) else exc.strerror
                raise _refuse(p, f"is not graded: {where} is {kind}, and a submission is read only through "
                                 f"real folders inside {base}") from None
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=fds[-1])
        except FileNotFoundError:
            raise NotebookError(f"no notebook at {p}") from None
        except IsADirectoryError:
            raise NotebookError(f"{p} is a directory, not a notebook (.ipynb file)") from None
        except PermissionError:
            raise NotebookError(f"{p} cannot be read (permission denied)") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(p, "is a symbolic link, not a notebook: a submission is graded only as the "
                                 "file itself (submit the notebook, not a link to one)") from None
            raise NotebookError(f"{p} cannot be read: {exc.strerror}") from None
        fds.append(fd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise NotebookError(f"{p} is a directory, not a notebook (.ipynb file)")
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
            raise _refuse(p, f"is {kind}, not a regular file: not graded")
        linked = hard_link_refusal(st, os.fstat(fds[-2]).st_uid)
        if linked:
            raise _refuse(p, f"is {linked}: not graded (submit the notebook itself, a file of your own)")
        on_disk = st.st_blocks * 512
        if st.st_size > MAX_BYTES or on_disk > MAX_BYTES:
            raise _refuse(p, f"is {max(st.st_size, on_disk):,} bytes (apparent size {st.st_size:,}, on disk "
                             f"{on_disk:,}): over the grader's bound of {MAX_BYTES:,} bytes for a submission; "
                             f"clear the notebook's outputs and submit again")
        from course_cli.sandboxed.readback import read_at_most

        data = read_at_most(fd, MAX_BYTES)
        if len(data) > MAX_BYTES:
            raise _refuse(p, f"grew past the grader's bound of {MAX_BYTES:,} bytes while it was read: not graded")
        return data
    finally:
        for fd in fds:
            os.close(fd)


def json_shape_over(obj, depth: int = MAX_DEPTH, containers: int = MAX_CONTAINERS) -> str | None:
    """Which bound the parsed JSON `obj` breaks ("depth" deeper than `depth`, "containers" more objects and
    arrays than `containers`), or None. Iterative, so its own cost is one pass over the containers."""
    level, seen = [obj], 0
    for _ in range(depth + 1):
        nxt = []
        for o in level:
            values = o.values() if isinstance(o, dict) else o
            nxt.extend(v for v in values if isinstance(v, (dict, list)))
        seen += len(level)
        if seen > containers:
            return "containers"
        if not nxt:
            return None
        level = nxt
    return "depth"


def _nbformat():
    # jsonschema, which nbformat imports, loads the optional `rfc3987_syntax` IRI checker when it is
    # installed (Jupyter's dependencies install it): ~0.9 s of grammar building for a format nbformat's
    # schema never uses. Declining it keeps `course check` fast; validation is otherwise unchanged.
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat

    return nbformat


def _malformed(p: Path, i: int, what: str) -> NotebookError:
    return NotebookError(f"{p}: cell {i + 1} has malformed {what} (not a JSON object); "
                         f"`course reset` restores a fresh copy of that cell")


def read_notebook(path: str | Path, root: str | Path | None = None):
    """The notebook at `path`, read as a submission (`submission_bytes`: a regular file inside `root`, never
    through a link, within MAX_BYTES), parsed within MAX_DEPTH and MAX_CELLS, all within MAX_SECONDS."""
    nbformat = _nbformat()

    p = Path(path)
    t0 = time.monotonic()
    data = submission_bytes(p, root)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{p} is not a notebook: it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    brackets = data.count(b"[") + data.count(b"{")
    del data
    if brackets > 8 * MAX_CONTAINERS:  # an upper bound on its containers, counted before the parse costs anything
        raise _refuse(p, f"holds {brackets:,} brackets, more than 8x the grader's bound of {MAX_CONTAINERS:,} JSON "
                         f"objects and arrays: not graded; clear the notebook's outputs and submit again")
    if not text.strip():
        raise NotebookError(f"{p} is empty: not a notebook (was it saved while the disk was full?)")
    try:
        raw = json.loads(text)
    except RecursionError:  # deeper than the interpreter's recursion limit (~1000): far over MAX_DEPTH
        raise _refuse(p, f"nests its JSON deeper than the grader's bound of {MAX_DEPTH} levels: not graded") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{p} is not a notebook: not valid JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno}); a truncated save? `course reset` restores a fresh copy") from None
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw:
        raise NotebookError(f"{p} is JSON but not a Jupyter notebook (no cells)")
    over = json_shape_over(raw)
    if over == "depth":
        raise _refuse(p, f"nests its JSON deeper than the grader's bound of {MAX_DEPTH} levels: not graded")
    if over == "containers":
        raise _refuse(p, f"holds more than the grader's bound of {MAX_CONTAINERS:,} JSON objects and arrays "
                         f"(cells, outputs, metadata): not graded; clear the notebook's outputs and submit again")
    cells = raw.get("cells") if "cells" in raw else [c for w in raw.get("worksheets") or [] if isinstance(w, dict)
                                                      for c in (w.get("cells") or [])]
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        raise _refuse(p, f"has {len(cells):,} cells: over the grader's bound of {MAX_CELLS:,} cells; not graded")
    if not isinstance(raw.get("metadata", {}), dict):  # said before nbformat, whose message is a Python error's
        raise NotebookError(f"{p}: the notebook's metadata is malformed (not a JSON object)")
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        if isinstance(cell, dict) and not isinstance(cell.get("metadata", {}), dict):
            raise _malformed(p, i, "metadata")
    del raw, cells
    try:
        with warnings.catch_warnings():  # nbformat's advice to its caller (missing cell ids) is not the student's
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for malformed notebooks
        raise NotebookError(f"{p} is not a valid Jupyter notebook: {str(exc).splitlines()[0][:200]}") from None
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell.get("source", ""), str):
            raise NotebookError(f"{p}: cell {i + 1} has no readable source")
        meta = cell.get("metadata", {})
        bad = "metadata" if not isinstance(meta, dict) else next(
            (f"metadata.{k}" for k in ("course", "nbgrader") if k in meta and not isinstance(meta[k], dict)), None)
        if bad:
            raise _malformed(p, i, bad)
    spent = time.monotonic() - t0
    if spent > MAX_SECONDS:  # checked after the fact: the bounds above keep a read well under it
        raise _refuse(p, f"took {spent:.0f} s to read and parse, over the grader's bound of {MAX_SECONDS:g} s")
    return nb
