"""Every file the course writes, written atomically through an unpredictable name created exclusively.

`write_bytes(path, data)`: a temporary file made with mkstemp (O_CREAT|O_EXCL, a random name, mode 0600) in
the target's own folder, written, fsynced, given `mode`, then renamed over `path`; the folder is fsynced. A
link planted at any name the course could have chosen is never followed (the name is not predictable and is
created exclusively), and a crash leaves the old file whole.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> Path:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def write_text(path: str | Path, text: str, mode: int = 0o644, encoding: str = "utf-8") -> Path:
    return write_bytes(path, text.encode(encoding), mode)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
