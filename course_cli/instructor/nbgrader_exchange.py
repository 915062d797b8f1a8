"""nbgrader's collect, copying only what a submission is: real folders and regular files, no link followed.

nbgrader's own ExchangeCollect copies each submission out of the exchange's inbound folder with
`shutil.copytree`, which follows links: a submission holding a link (to the instructor's `source/` notebook, to a
file only the instructor can read) has its target's content copied in, read with the instructor's rights, and
graded as the student's. `CourseExchangeCollect` (the course's nbgrader_config.py sets it as
`ExchangeFactory.collect`) copies the same files under the same options (`CourseDirectory.ignore`, `include`,
`max_file_size`, `max_dir_size`), but walks the submission through descriptors opened with O_NOFOLLOW and
decides on fstat: a link, a FIFO, a socket or a device is not copied (nor opened), nor is a hard link to a file
the submission folder's owner cannot read (`notebook.hard_link_refusal`), and the submission is NOT
GRADED with the reason (so is one over a bound on all of it, `max_dir_size` or MAX_ENTRIES, which nbgrader's
own copy answers by raising, ending the collect of every later student): each of its notebooks is set aside in
`refused/<student>/<assignment>/` and the released notebook, recording why, takes its name
(`nbgrader_course.refuse_notebook`, as autograde does for what it finds in submitted/), so autograde and export
say NOT GRADED and why, never a score.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import stat
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect

from course_cli.sandboxed.notebook import hard_link_refusal

MAX_DEPTH = 32  # folders inside a submission; a lesson's has none
MAX_ENTRIES = 10_000  # files and folders in a submission; a lesson's has a handful


class _TooMuch(Exception):
    """The submission breaks a bound on all of it: nothing of it is kept."""
_CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "neither a regular file nor a folder"


class _Copy:
    """One submission's copy: what was left out as not a file, and the bytes copied so far."""

    def __init__(self, ignore, include, max_file_size, max_dir_size, extra_mode, log, owners=None):
        self.ignore, self.include = list(ignore or []), list(include or [])
        self.owners = owners  # the uids a submission's files may belong to (None: any)
        self.max_file = 1000 * max_file_size if max_file_size else None  # nbgrader's units: kB
        self.max_dir = 1000 * max_dir_size if max_dir_size else None
        self.extra_mode, self.log = extra_mode, log
        self.refused: list[str] = []
        self.total = self.entries = 0

    def folder(self, sfd: int, dfd: int, rel: str, depth: int) -> None:
        with os.scandir(sfd) as entries:
            names = sorted(e.name for e in entries)
        self.entries += len(names)
        if self.entries > MAX_ENTRIES:
            raise _TooMuch(f"more than {MAX_ENTRIES:,} files and folders (the course's bound)")
        for name in names:
            where = f"{rel}{name}"
            if any(fnmatch.fnmatch(name, g) for g in self.ignore):  # nbgrader's CourseDirectory.ignore
                continue
            try:
                st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if self.owners is not None and st.st_uid not in self.owners:
                self.refused.append(f"{where} (owned by uid {st.st_uid}, not by the student it was submitted as)")
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    self.refused.append(f"{where}/ (folders nested deeper than {MAX_DEPTH})")
                    continue
                try:
                    cfd = os.open(name, _DIR, dir_fd=sfd)
                except OSError as exc:  # replaced by a link (ELOOP, ENOTDIR) since the stat, or unreadable
                    link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
                    self.refused.append(f"{where} ({'a symbolic link' if link else exc.strerror})")
                    continue
                try:
                    os.mkdir(name, 0o700, dir_fd=dfd)
                    nfd = os.open(name, _DIR, dir_fd=dfd)
                    try:
                        self.folder(cfd, nfd, f"{where}/", depth + 1)
                        os.fchmod(nfd, (stat.S_IMODE(st.st_mode) | 0o700 | (self.extra_mode and 0o2770)) & 0o2777)
                    finally:
                        os.close(nfd)
                finally:
                    os.close(cfd)
            elif stat.S_ISREG(st.st_mode):
                self.file(sfd, dfd, name, where, st)
            else:
                self.refused.append(f"{where} ({_kind(st.st_mode)})")

    def file(self, sfd: int, dfd: int, name: str, where: str, st) -> None:
        if self.include and not any(fnmatch.fnmatch(name, g) for g in self.include):
            return
        if self.max_file and st.st_size > self.max_file:
            if self.log:
                self.log.warning("Ignoring file too large '%s' (see config option CourseDirectory.max_file_size)",
                                 where)
            return
        try:
            fd = os.open(name, _FILE, dir_fd=sfd)
        except FileNotFoundError:
            return
        except OSError as exc:  # ELOOP: replaced by a link since the stat; EACCES: its student made it unreadable
            self.refused.append(f"{where} ({'a symbolic link' if exc.errno == errno.ELOOP else exc.strerror})")
            return
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode):  # replaced by a FIFO or a device since the stat
                self.refused.append(f"{where} ({_kind(fst.st_mode)})")
                return
            if self.owners is not None and fst.st_uid not in self.owners:  # replaced since the stat
                self.refused.append(f"{where} (owned by uid {fst.st_uid}, not by the student it was submitted as)")
                return
            linked = hard_link_refusal(fst, os.fstat(sfd).st_uid)  # a second name of a file they cannot read
            if linked:
                self.refused.append(f"{where} ({linked})")
                return
            self.total += fst.st_size
            if self.max_dir and self.total > self.max_dir:
                raise _TooMuch(f"more than {self.max_dir:,} bytes in all (CourseDirectory.max_dir_size)")
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=dfd)
            try:
                left = fst.st_size  # what fstat saw: a file that grows meanwhile is copied as it was then
                while left > 0:
                    chunk = os.read(fd, min(_CHUNK, left))
                    if not chunk:
                        break
                    os.write(out, chunk)
                    left -= len(chunk)
                os.fchmod(out, (stat.S_IMODE(fst.st_mode) | 0o600 | (self.extra_mode and 0o660)) & 0o777)
                os.utime(out, ns=(fst.st_atime_ns, fst.st_mtime_ns))  # as copytree's copy2
            finally:
                os.close(out)
        finally:
            os.close(fd)


def copy_submission(src: str | Path, dest: str | Path, ignore=None, include=None, max_file_size=None,
                    max_dir_size=None, groupshared: bool = False, log=None, owners=None) -> list[str]:
    """Copy the submission folder `src` to `dest` (which must not exist) as nbgrader's `do_copy` does, without
    following any link: every folder is opened with O_NOFOLLOW relative to the one above it, every file with
    O_NOFOLLOW|O_NONBLOCK, and fstat on the descriptor decides. Returns what was not copied for not being a
    real folder or a regular file ("lesson01.ipynb (a symbolic link)"), relative to `src`; when `src` itself
    is a link, nothing is copied. Over `max_dir_size` bytes or MAX_ENTRIES entries in all: nothing is kept
    (nbgrader's own copy raises there, which ends the collect of every later student). With `owners` (uids),
    a file or folder of any other user is not copied either ("owned by uid N, not by the student ...")."""
    src, dest = Path(src), Path(dest)
    os.makedirs(dest.parent, exist_ok=True)
    os.mkdir(dest, 0o700)
    try:
        top = os.open(src, _DIR)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            return [f"{src.name} itself ({exc.strerror})"]
        return [f"{src.name} itself ({_kind(os.lstat(src).st_mode)})"]
    copy = _Copy(ignore, include, max_file_size, max_dir_size, groupshared, log, owners)
    try:
        dfd = os.open(dest, _DIR)
        try:
            copy.folder(top, dfd, "", 0)
            os.fchmod(dfd, (stat.S_IMODE(os.fstat(top).st_mode) | 0o700 | (groupshared and 0o2770)) & 0o2777)
        finally:
            os.close(dfd)
    except _TooMuch as exc:
        shutil.rmtree(dest)
        os.mkdir(dest, 0o700)
        return [f"{src.name} ({exc})"]
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(top)
    return copy.refused


def refusal(refused: list[str]) -> str:
    """Why a submission holding `refused` is not graded, in words for its student and the instructor alike."""
    shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
    return (f"the submission held {shown}: collect copies a submission's own regular files and folders only, "
            f"never through a link, within bounds, so it is not graded; submit the notebook itself")


class CourseExchangeCollect(ExchangeCollect):
    """nbgrader's ExchangeCollect, copying each submission with `copy_submission` (no link followed); a
    submission that held anything else is NOT GRADED with the reason (`refuse_notebook`). A submission made
    under a local user's id by another user (`nbgrader_course.claimed_owners`) is not collected at all: the
    newest one that user made is, as nbgrader would choose it among theirs, and the forged one is logged as an
    error."""

    def _sort_by_timestamp(self, records):
        """nbgrader's choice among one student's submissions, among those that student made only (a forged one
        left out, said once); when none is theirs, a stand-in that `copy_files` drops."""
        from course_cli.instructor.nbgrader_course import claimed_owners
        from course_cli.safe_text import for_terminal

        theirs = []
        for rec in records:
            _, why = claimed_owners(os.path.join(self.inbound_path, rec["filename"]), rec["username"])
            if why is None:
                theirs.append(rec)
                continue
            self._forged = getattr(self, "_forged", set())
            if rec["filename"] not in self._forged:
                self._forged.add(rec["filename"])
                self.log.error("NOT COLLECTED: %s", for_terminal(why, 2000, newlines=False))
        if theirs:
            return super()._sort_by_timestamp(theirs)
        newest = super()._sort_by_timestamp(records)[0]
        return [{**newest, "filename": None}]  # only forged ones: nothing of them is collected

    def copy_files(self):
        self.src_records = [r for r in self.src_records if r.get("filename")]
        return super().copy_files()

    def do_copy(self, src, dest, log=None):
        from course_cli.instructor.nbgrader_course import claimed_owners, refuse_notebook
        from course_cli.safe_text import for_terminal

        cd = self.coursedir
        owners, why = claimed_owners(src, self._path_to_record(src)["username"])
        if why is not None:  # (init_src left these out: a folder that changed hands since)
            self.log.error("NOT COLLECTED: %s", for_terminal(why, 2000, newlines=False))
            return
        refused = copy_submission(src, dest, cd.ignore, cd.include, cd.max_file_size, cd.max_dir_size,
                                  cd.groupshared, self.log, owners)
        if not refused:
            return
        why = refusal(refused)
        dest = Path(dest)
        self.log.error("NOT GRADED: %s: %s", for_terminal(f"{dest.parent.name}/{dest.name}", 200, newlines=False),
                       for_terminal(why, 2000, newlines=False))
        released = Path(cd.format_path(cd.release_directory, ".", dest.name))
        names = {p.name for p in dest.glob("*.ipynb")}
        if released.is_dir():
            names |= {p.name for p in released.glob("*.ipynb")}
        for name in sorted(names):
            refuse_notebook(dest / name, why)
