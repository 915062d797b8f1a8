"""Every file the course writes, written atomically through an unpredictable name created exclusively.

`write_bytes(path, data)`: a temporary file made with mkstemp (O_CREAT|O_EXCL, a random name, mode 0600) in
the target's own folder, written, fsynced, given its mode, then renamed over `path`; the folder is fsynced. A
link planted at any name the course could have chosen is never followed (the name is not predictable and is
created exclusively; a rename replaces a link at `path` or `<path>.bak`, it never writes through one), and a
crash leaves the old file whole. With backup=True what was at `path` is kept as `<path>.bak` (a hard link
made before the rename, so `path` is never missing). A file replaced keeps its mode unless one is given.

`create_new(path, data)`: the same, but never replaces anything at `path` (FileExistsError, a link included).
`create_for_append(path, first)`: the same as write_bytes, returning the new file open for appending (the
journal). `open_regular(path, flags)`: an existing file opened without following a link at its last name,
refused (OSError) unless it is a regular file (a FIFO is not waited on). `read_bytes(path)`: read that way.
`open_append(path)`: a log or lock file opened for appending, created 0600 if missing, never through a link.
`staged_folder(path)`: a folder built under an unpredictable name (mkdtemp, 0700) beside `path`, renamed to
`path` (absent or an empty folder) when the block ends without an error, removed otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path


def write_bytes(path: str | Path, data: bytes, mode: int | None = None, backup: bool = False) -> Path:
    path = Path(path)
    f, tmp = _staged(path, data, mode)
    try:
        f.close()
        if backup:
            keep_backup(path)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def write_text(path: str | Path, text: str, mode: int | None = None, encoding: str = "utf-8",
               backup: bool = False) -> Path:
    return write_bytes(path, text.encode(encoding), mode, backup)


def create_new(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    """Write `path` only if nothing (not even a dangling link) is there: FileExistsError otherwise. Staged
    under an unpredictable name, then hard-linked to `path` (link(2) never replaces and never follows)."""
    path = Path(path)
    f, tmp = _staged(path, data, mode)
    try:
        f.close()
        os.link(tmp, path, follow_symlinks=False)
    finally:
        _unlink(tmp)
    _fsync_dir(path.parent)
    return path


def create_for_append(path: str | Path, first: bytes, mode: int | None = None, backup: bool = False):
    """A new file at `path` holding `first`, renamed into place as write_bytes does; returned open ("ab") so
    that later writes go to that file whatever is planted at its name afterwards."""
    path = Path(path)
    f, tmp = _staged(path, first, mode)
    try:
        if backup:
            keep_backup(path)
        os.replace(tmp, path)
    except BaseException:
        f.close()
        _unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return f


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor on the regular file at `path`, its last name not followed if it is a link; OSError with a
    plain reason for a link, a FIFO, a device or a folder."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) and not os.path.islink(path):
            raise OSError(errno.EINVAL, "it is not a regular file", str(path))  # a device is not even opened
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symbolic link (not followed)", str(path)) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "it is not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


def read_bytes(path: str | Path, limit: int = -1) -> bytes:
    """The regular file's bytes (its first `limit` with a limit), as open_regular opens it."""
    with os.fdopen(open_regular(path), "rb") as f:
        return f.read(limit)


def open_append(path: str | Path, mode: int = 0o600):
    """`path` open for appending ("ab"), created with `mode` if nothing is there; OSError (as open_regular's)
    for a link at its last name, a FIFO, a device or a folder: a log or a lock is never written through one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symbolic link (not followed)", str(path)) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO nobody reads, a device, a folder
            raise OSError(errno.EINVAL, "it is not a regular file", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "it is not a regular file", str(path))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab")


@contextlib.contextmanager
def staged_folder(path: str | Path, mode: int = 0o755):
    """Yield a new private folder (mkdtemp: a random name, 0700) beside `path`, to fill; when the block ends
    without an error it gets `mode` less the umask and is renamed to `path`, which must be absent or an empty
    folder (a link there is not followed: OSError); otherwise it is removed. Nothing is written under `path`
    before it is complete, and nothing another user planted there is written through."""
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, mode & ~_umask())
        os.rename(tmp, path)  # rename(2): over an empty folder only; a link or a file there: ENOTDIR
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)


def keep_backup(path: str | Path) -> Path | None:
    """Keep what is at `path` (a file or a link, as it is) as `<path>.bak`, replacing an older one; None when
    nothing is there. `path` itself is left in place."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None  # the rename over it fails, with the caller's message
    bak = path.with_name(path.name + ".bak")
    tmp = _free_name(path, ".bak")
    try:
        os.link(path, tmp, follow_symlinks=False)
    except OSError:  # a filesystem without hard links: a copy of its bytes (or of the link)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(path), tmp)
        else:
            f, tmp = _staged(path, read_bytes(path), None)
            f.close()
    try:
        os.replace(tmp, bak)
    except BaseException:
        _unlink(tmp)
        raise
    return bak


def _staged(path: Path, data: bytes, mode: int | None):
    """(file open for writing, its name): the data written and fsynced to a new file of an unpredictable name
    beside `path` (mkstemp: O_EXCL, mode 0600 until the end). Its mode: `mode` less the umask; else that of
    the regular file it replaces; else 0644 less the umask."""
    if mode is not None:
        mode &= ~_umask()
    else:
        try:
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
        except OSError:
            pass
    if mode is None:
        mode = 0o644 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    f = os.fdopen(fd, "wb")
    try:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
        os.fchmod(f.fileno(), mode)
    except BaseException:
        f.close()
        _unlink(tmp)
        raise
    return f, tmp


def _free_name(path: Path, suffix: str) -> str:
    return str(path.with_name(f".{path.name}.{secrets.token_hex(8)}{suffix}"))


def _unlink(name) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def _fsync_dir(folder: Path) -> None:
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
