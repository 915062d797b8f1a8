"""The warm grading process inside the sandbox: imports torch and the graders once, then forks one check
per job. It never runs student code itself (see "Warm checks" in docs/architecture.md).

Started by `course_cli.sandboxed.warm` as `python -m course_cli.sandboxed.zygote FD MODULE` under the same
bubblewrap rules as every grading child (sandbox._bwrap_argv: no network, the allowlisted read-only binds, a
scrubbed environment), with a jobs folder bound read-write in place of a child's output folder. FD is a Unix
socket to the warm server, the only thing it listens to. Per job:

    zygote ─ fork ─ C: unshare(user, mount, pid, ipc, uts, net, cgroup), fresh sized tmpfs /tmp (with the
                       zygote's binds under /tmp bound through, read-only: a course or venv made there) and
                       /dev/shm, the jobs folder hidden, the job's output folder a sized tmpfs holding only
                       its job file (the check sends the server its descriptor on VIEW_FD)
                    └─ fork ─ G: pid 1 of the new PID namespace (the sandbox's init, as bwrap's is);
                                 waits until the server holds a pidfd on it
                              └─ fork ─ the check (pid 2): its own session, no capabilities, no_new_privs,
                                        the child's rlimits, every inherited descriptor closed; then
                                        course_cli.sandboxed.child runs the job exactly as a cold child does

The server kills a check by its pidfd on G (the end of a PID namespace's init kills everything in it). The
zygote is not dumpable, so a check (in a nested user namespace, without capabilities) can neither trace it,
read its memory, nor open /proc/<zygote>/root; its pid is outside the check's PID namespace, so a check can
not signal it either. Before each fork the zygote checks that it is still one thread (no OpenMP or intra-op
pool started): a forked child of a multi-threaded process could deadlock.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import signal
import socket
import stat
import struct
import sys
import traceback

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
_libc = ctypes.CDLL(None, use_errno=True)


def send(sock: socket.socket, msg: dict, fds: list[int] = ()) -> None:
    data = json.dumps(msg).encode()
    frame = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [frame], list(fds))
    else:
        sock.sendall(frame)


def recv(sock: socket.socket, want_fds: bool = False):
    """One frame: the message (None at EOF), and with want_fds the descriptors sent with it."""
    fds: list[int] = []
    head = b""
    while len(head) < 4:
        if want_fds and not head:
            part, got, _, _ = socket.recv_fds(sock, 4, 4)
            fds += got
        else:
            part = sock.recv(4 - len(head))
        if not part:
            return (None, fds) if want_fds else None
        head += part
    (n,) = struct.unpack("!I", head)
    body = b""
    while len(body) < n:
        part = sock.recv(n - len(body))
        if not part:
            return (None, fds) if want_fds else None
        body += part
    msg = json.loads(body)
    return (msg, fds) if want_fds else msg


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = lambda s: s.encode() if isinstance(s, str) else s  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _enter_namespaces(out: str, limits: dict) -> None:
    """In C: new namespaces (this user mapped to itself), a private /tmp and /dev/shm, the jobs folder hidden,
    and in place of `out` a tmpfs of limits["out"] bytes holding only the job file: what the check writes is
    capped by the kernel and never reaches the grader's disk (the server reads it through the descriptor the
    check sends)."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    _check(_libc.unshare(flags), "unshare")
    _libc.unshare(CLONE_NEWCGROUP)  # as bwrap's --unshare-cgroup-try: where the kernel has it
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    with open(os.path.join(out, "job.json"), "rb") as f:  # before the jobs folder is covered
        job = f.read()
    jobs = os.path.dirname(out)
    kept = _binds_under_tmp(jobs)  # the course, its venv, the notebook's folder, when they live under /tmp
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['tmp']},mode=0755")
    for path, fd in kept:  # bound through, as the zygote sees them (read-only), into the fresh /tmp
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.makedirs(path, exist_ok=True)
        else:  # a file bound alone (a venv's pyvenv.cfg)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
        if not os.statvfs(path).f_flag & os.ST_RDONLY:
            _mount("none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            if not os.statvfs(path).f_flag & os.ST_RDONLY:
                raise OSError(f"{path} would be writable in the check")
    if os.path.isdir("/dev/shm"):  # not the zygote's: nothing one check leaves there reaches the next
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['shm']},mode=01777")
    if os.path.isdir(jobs):  # the jobs folder is outside /tmp: hide it under an empty tmpfs
        _mount("tmpfs", jobs, "tmpfs", MS_NOSUID | MS_NODEV, "size=65536,mode=0755")
    os.makedirs(out, exist_ok=True)
    _mount("tmpfs", out, "tmpfs", MS_NOSUID | MS_NODEV, f"size={limits['out']},mode=0700")
    with open(os.path.join(out, "job.json"), "wb") as f:
        f.write(job)


def _binds_under_tmp(jobs: str) -> list[tuple[str, int]]:
    """The outermost mounts under /tmp in this mount namespace (what bubblewrap bound there for the zygote: a
    course, a venv or a notebook folder made under /tmp), less the jobs folder, each with an O_PATH descriptor
    taken before a fresh /tmp covers them. Without them a check's lazy imports would find nothing there."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")  # (spaces come as \040)
            if point.startswith("/tmp/") and not (point == jobs or point.startswith(jobs + "/")):
                points.append(point)
    outer = [p for p in sorted(set(points)) if not any(p.startswith(q + "/") for q in points if q != p)]
    return [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in outer]


def _drop_privileges() -> None:
    """The check runs with no capabilities in its namespaces and cannot gain any (as under bwrap)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: ignored

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


VIEW_FD = 3  # in the check: the socket it sends its output folder's descriptor on (the job's view_fd)


def _run_check(job_path: str, limits: dict, view: int) -> None:
    """The check itself (pid 2 of its namespace): the child's limits, then course_cli.sandboxed.child."""
    os.setsid()
    _drop_privileges()
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc entries, as a cold child's (it is alone here)
    memory = limits["memory"]
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file"], limits["file"]))
    # the zygote's socket and pipes: nothing of the warm process stays reachable; only the server's socket
    # for the output folder's descriptor, as VIEW_FD
    if view != VIEW_FD:
        os.dup2(view, VIEW_FD)
        os.close(view)
    os.closerange(VIEW_FD + 1, max(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    os.chdir(os.path.dirname(job_path))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["course_cli.sandboxed.child", job_path]
    # lazy: warm's client imports this module for send/recv; the child is the zygote's own (+28 ms there)
    from course_cli.sandboxed import child

    code = 1
    try:
        child.main()  # ends with os._exit(0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    os._exit(code)


def _init(go: int, job_path: str, limits: dict, view: int) -> None:
    """G, pid 1 of the check's namespace: once the server holds its pidfd, start the check and reap; exit as
    bwrap does (the check's exit code, or 128 + the signal that killed it)."""
    if not os.read(go, 1):  # the zygote went away before handing over the check: nothing to run
        os._exit(1)
    os.close(go)
    pid = os.fork()
    if pid == 0:
        _run_check(job_path, limits, view)
    os.close(view)
    status = 1
    while True:
        try:
            got, st = os.wait()
        except ChildProcessError:
            break
        if got == pid:
            status = os.waitstatus_to_exitcode(st)
            status = 128 - status if status < 0 else status
            break
    os._exit(status)


def _fork_check(ctl: socket.socket, job: dict, view: int) -> None:
    limits = job["limits"]
    go_r, go_w = os.pipe()
    pid_r, pid_w = os.pipe()
    c = os.fork()
    if c == 0:  # C
        try:
            ctl.close()
            os.close(go_w)
            os.close(pid_r)
            _enter_namespaces(job["out"], limits)
            g = os.fork()
            if g == 0:
                os.close(pid_w)
                _init(go_r, job["job"], limits, view)
            os.close(view)
            os.close(go_r)
            os.write(pid_w, str(g).encode())
            os.close(pid_w)
            _, st = os.waitpid(g, 0)
            if os.WIFSIGNALED(st):
                signal.signal(os.WTERMSIG(st), signal.SIG_DFL)
                os.kill(os.getpid(), os.WTERMSIG(st))
            os._exit(os.waitstatus_to_exitcode(st))
        except BaseException as exc:
            try:
                os.write(2, f"warm check setup failed: {exc!r}\n".encode())
            finally:
                os._exit(70)
    os.close(view)
    os.close(go_r)
    os.close(pid_w)
    got = b""
    while True:
        part = os.read(pid_r, 32)
        if not part:
            break
        got += part
    os.close(pid_r)
    if not got:  # C failed before G existed
        os.close(go_w)
        _, st = os.waitpid(c, 0)
        send(ctl, {"error": f"the check's sandbox could not be made (exit {os.waitstatus_to_exitcode(st)})"})
        return
    pidfd = os.pidfd_open(int(got))
    send(ctl, {"started": True}, [pidfd])
    os.close(pidfd)
    os.write(go_w, b"g")
    os.close(go_w)
    _, st = os.waitpid(c, 0)
    send(ctl, {"status": os.waitstatus_to_exitcode(st)})


def preload(module) -> list[str]:
    """Import once what every check of `module`'s lesson would otherwise import lazily in its forked child, and
    lose with it: the lesson's WARM_IMPORTS (what torch imports lazily for its probes: sympy under
    nn.MultiheadAttention's mask check, torch._dynamo under a meta-device tril, ...; tests/e2e/test_warm_imports.py
    finds what a lesson's check imports and names what is missing). Not Hypothesis: a warm check is handed the
    reference's draws and never draws itself. Importing starts no thread pool. Returns the names it could not
    import (triton is an extra)."""
    from graders.engine.probe import defer_dynamo  # lazy: the probe imports torch (4.6 s); warm's client must not

    missing = []
    for name in getattr(module, "WARM_IMPORTS", ()):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    defer_dynamo()  # the `_disable_dynamo` wrappers these imports made, too
    return missing


def main() -> None:
    fd, module = int(sys.argv[1]), sys.argv[2]
    ctl = socket.socket(fileno=fd)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no check may trace this process or open its /proc entries
    sys.stdin = open(os.devnull)
    # What a cold child imports before the first cell, done once: torch, the engine, the lesson's grader and
    # the child itself. Nothing here computes with torch (no thread pool may start before a fork).
    # lazy: these are the zygote's preload (torch: 4.6 s here); warm's client imports this module for send/recv
    import torch  # noqa: F401

    from graders import engine  # lazy: as torch above (the engine's names resolve to torch-importing modules)

    for name in ("probe_exercise", "register_source", "student_traceback", "ExerciseTimeout", "mistake_source"):
        getattr(engine, name)
    preload(__import__(module, fromlist=["CHECKS"]))
    from course_cli.sandboxed import child  # noqa: F401  (lazy: as torch above)

    send(ctl, {"ready": True, "threads": threads(), "torch": torch.__version__})
    while True:
        job, fds = recv(ctl, want_fds=True)
        if job is None or job.get("op") == "stop":
            os._exit(0)
        n = threads()
        if n != 1:
            send(ctl, {"error": f"the warm process has {n} threads; forking it is not safe"})
            os._exit(3)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            send(ctl, {"error": f"a check comes with one socket for its output folder, not {len(fds)}"})
            continue
        _fork_check(ctl, job, fds[0])


if __name__ == "__main__":
    main()
