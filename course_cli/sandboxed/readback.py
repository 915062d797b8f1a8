"""Reading back what a grading child wrote, without trusting it.

The child runs student code, so every file in its output folder may be hostile: a FIFO that blocks a reader
forever, a symbolic link to a secret or to /dev/zero, a file of gigabytes, a zip archive whose records inflate
to gigabytes, JSON nested a million deep, tensors that are quantized, nested, sparse or subclasses, whose
methods (or whose mere comparison) would crash the judge. Everything here fails with `ReadBackError`, whose
message is said to the student as an `error` verdict: never a traceback, a hang or a memory blow-up in the
parent.

  read_bytes   a regular file only (O_NOFOLLOW | O_NONBLOCK, then fstat), at most `limit` bytes
  read_json    read_bytes + a size and depth cap
  load_tensors read_bytes + a zip archive whose records are all stored uncompressed, within a total cap,
               unpickled by torch's weights-only loader, then `check_plain`: plain data and plain tensors only
"""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile

JSON_LIMIT = 4 * 2**20          # cells.json, bench.json, env.json
OBS_LIMIT = 64 * 2**20          # one observation file (the child's own file limit is lower: 32 MiB)
MAX_DEPTH = 24                  # nesting of dicts and lists (observations are ~10 deep)
MAX_NODES = 200_000             # values in one observation file
MAX_STRING = 200_000            # characters in one string
TENSOR_DTYPES = {"float16", "bfloat16", "float32", "float64", "bool", "uint8", "int8", "int16", "int32", "int64",
                 "complex64", "complex128"}


class ReadBackError(Exception):
    """What the child left is not something the grader reads; the message says what it was."""


def read_bytes(path: "str | os.PathLike", limit: int) -> bytes:
    """The contents of a regular file, at most `limit` bytes; anything else is a ReadBackError."""
    name = os.path.basename(os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ReadBackError(f"{name} is missing") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symbolic link
            raise ReadBackError(f"{name} is a symbolic link, not a file the grading child wrote") from None
        raise ReadBackError(f"{name} cannot be opened ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadBackError(f"{name} is not a regular file (a FIFO, a device or a folder): not read")
        if st.st_size > limit:
            raise ReadBackError(f"{name} is {st.st_size / 2**20:.1f} MiB, over the {limit / 2**20:g} MiB the grader reads")
        data = read_at_most(fd, limit)
        if len(data) > limit:
            raise ReadBackError(f"{name} grew past the {limit / 2**20:g} MiB the grader reads")
        return data
    finally:
        os.close(fd)


def read_at_most(fd: int, limit: int) -> bytes:
    """At most `limit` + 1 bytes from the open file `fd`: more than `limit` back means the file is longer."""
    chunks, total = [], 0
    while total <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_tail(path: "str | os.PathLike", limit: int) -> str:
    """The last `limit` bytes of a regular file as text; "" for anything else (missing, FIFO, link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _visit(depth: int, count: list) -> None:
    """Count one more value at `depth`, within the caps."""
    count[0] += 1
    if count[0] > MAX_NODES:
        raise ReadBackError(f"more than {MAX_NODES} values")
    if depth > MAX_DEPTH:
        raise ReadBackError(f"nested deeper than {MAX_DEPTH} levels")


def _check_depth(obj, depth: int = 0, count: list | None = None) -> None:
    count = count if count is not None else [0]
    _visit(depth, count)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_depth(v, depth + 1, count)
    elif isinstance(obj, list):
        for v in obj:
            _check_depth(v, depth + 1, count)


def read_json(path: "str | os.PathLike", limit: int = JSON_LIMIT):
    """JSON from a regular file, within size and depth caps."""
    data = read_bytes(path, limit)
    name = os.path.basename(os.fspath(path))
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ReadBackError(f"{name} is not valid JSON ({type(exc).__name__})") from None
    try:
        _check_depth(obj)
    except ReadBackError as exc:
        raise ReadBackError(f"{name}: {exc}") from None
    return obj


def check_archive(data: bytes, name: str, limit: int = OBS_LIMIT) -> None:
    """A torch.save archive whose records are stored (not compressed) and add up to at most `limit`."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise ReadBackError(f"{name} is not an observation archive") from None
    if len(infos) > 10_000:
        raise ReadBackError(f"{name} holds {len(infos)} records, too many")
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise ReadBackError(f"{name} holds a compressed record ({info.filename[:60]}): observations are "
                                f"stored uncompressed, so this file was not written by the grader")
        total += info.file_size
        if info.file_size > limit or total > limit:
            raise ReadBackError(f"{name} holds more than {limit / 2**20:g} MiB of records")


def check_plain(obj, depth: int = 0, count: list | None = None):
    """`obj` if it is plain data: dicts with string keys, lists, tuples, strings, numbers, None, and dense
    strided CPU tensors of an ordinary dtype (exactly torch.Tensor: no subclass, quantized, nested, sparse,
    meta). Raises ReadBackError saying what was not."""
    import torch

    count = count if count is not None else [0]
    _visit(depth, count)
    t = type(obj)
    if obj is None or t in (bool, int, float):
        return obj
    if t is str:
        if len(obj) > MAX_STRING:
            raise ReadBackError(f"a string of {len(obj)} characters")
        return obj
    if t is dict:
        for k, v in obj.items():
            if type(k) is not str:
                raise ReadBackError(f"a key of type {type(k).__name__}")
            check_plain(v, depth + 1, count)
        return obj
    if t in (list, tuple):
        for v in obj:
            check_plain(v, depth + 1, count)
        return obj
    if t is torch.Tensor:
        if obj.is_quantized:
            raise ReadBackError("a quantized tensor")
        if obj.is_nested:
            raise ReadBackError("a nested tensor")
        if obj.layout != torch.strided:
            raise ReadBackError(f"a {str(obj.layout).removeprefix('torch.')} tensor (only dense tensors)")
        if obj.device.type != "cpu":
            raise ReadBackError(f"a tensor on {obj.device.type}")
        if str(obj.dtype).removeprefix("torch.") not in TENSOR_DTYPES:
            raise ReadBackError(f"a tensor of dtype {obj.dtype}")
        if not obj.is_contiguous():  # the child sends contiguous copies; an expanded view could claim 10^12 values
            raise ReadBackError("a tensor that is not contiguous (an expanded or strided view)")
        return obj
    raise ReadBackError(f"a value of type {t.__name__[:60]}")


def load_tensors(path: "str | os.PathLike", limit: int = OBS_LIMIT):
    """An observation file: checked as a regular file, an uncompressed archive, then unpickled by torch's
    weights-only loader (data, never code), then checked to be plain data."""
    import torch

    name = os.path.basename(os.fspath(path))
    data = read_bytes(path, limit)
    check_archive(data, name, limit)
    try:
        obj = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # weights_only refuses anything that is not plain data
        raise ReadBackError(f"{name} could not be read as observations ({type(exc).__name__})") from None
    try:
        return check_plain(obj)
    except ReadBackError as exc:
        raise ReadBackError(f"{name} holds {exc}, which the grader does not accept") from None
