"""Starting and collecting the sandboxed child (course_cli/sandboxed/child.py).

Every child that runs student code runs inside bubblewrap (`bwrap`, Debian's `bubblewrap`, the tool Flatpak
uses) when it is there: its own user, PID, IPC, UTS, cgroup and network namespaces (no network at all); a
world built from an explicit list (`_bwrap_argv`): the system's /usr and the loader's paths, this interpreter,
its standard library and site-packages folders, the course code (for a student's child, the child build of the
graders: no mistakes, no later lesson), the `visible` paths and its own output folder; never sys.path,
sys.prefix or the folder the grader was started in (covered by an empty tmpfs where it lies inside a folder
shown). `/` and `/dev` read-only, a sized /tmp and /dev/shm; an environment of the names in ENV_NAMES only;
`--die-with-parent`, and a PID namespace whose end kills everything the child started. Without bwrap (macOS,
Windows, Linux without user namespaces) the child runs as before, as this user; class grading refuses that
unless told `--insecure` (COURSE_INSECURE=1). A child bubblewrap could not start is SandboxFailed: "not
graded", never a score.

The child's limits:

  time     per cell and per exercise: an alarm inside the child (Limits.cell_timeout / .exercise_timeout) and, for a
           child that ignores signals, from here, on this process's clock: the phases and their limits are
           planned before the child starts (`_schedule`); the child's `progress` file only moves it forward
           through them and only shortens its deadline; a phase GRACE seconds past its limit gets the whole
           sandbox killed; per notebook (.notebook_timeout): past it the whole sandbox is killed
  memory   RLIMIT_AS (.memory), reported as "ran out of memory"; and where a cgroup can be made (v1's
           memory controller, or v2's memory.max), a memory cgroup for heap and tmpfs pages together, so
           the kernel kills in the child's cgroup, never the grader
  output   prints are capped at .output bytes inside the child (the rest is dropped and reported as
           "output limit exceeded"); every file the child writes is capped by RLIMIT_FSIZE (.file,
           SIGXFSZ ignored, so a write past it fails with "File too large"); all it writes together by
           .write: /tmp a tmpfs of .tmp, /dev/shm of .shm, its output folder a tmpfs of the rest, all three
           refused by the kernel when full ("No space left on device") and charged to its memory cgroup;
           nothing it writes reaches the grader's disk (the parent reads the output folder through the
           descriptor the child sends first thing, Child.files), and a full output folder stops the child
           ("output limit exceeded"). Without bubblewrap's --size (< 0.7) the three are folders of its
           output folder on the grader's disk, whose total the parent walks every 0.2 s
  processes  a cgroup `pids.max` (.processes, threads included) when the cgroup tree is writable
           (root, or a delegated cgroup); the sandbox has no /sys, so the child cannot raise it or leave the
           cgroup; whatever the child leaves behind is killed when it ends (its PID namespace, its process
           group, and every process in its cgroup), and its folder removed (`remove_tree`, never recursion)

Everything the child reports comes back as files, read by `course_cli.sandboxed.readback`: regular files only,
bounded sizes, JSON with capped depth, uncompressed tensor archives of plain tensors (never code).
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from graders.registry import LESSONS, ROOT

from course_cli import settings
from course_cli.safe_text import for_terminal
from course_cli.sandboxed import readback
from course_cli.sandboxed.child_build import ChildBuildUntrusted, child_build
# The limits (memory, time, output, files, processes, /tmp, /dev/shm, writes) are the run's: course_cli/settings.py's
# Limits, read by `limits()` when a child starts, never at import.
STARTUP_ALLOWANCE = 60.0  # importing torch on a busy machine, on top of the notebook's limit
GRACE = 3.0  # seconds past a cell's or an exercise's limit before the sandbox is killed from outside


# ----------------------------------------------------------------------------------------------
# bubblewrap

class SandboxUnavailable(Exception):
    """Class grading was asked for, and the sandbox cannot run here; the message says how to fix it."""


class SandboxFailed(SandboxUnavailable):
    """A child could not be started in its sandbox (bubblewrap failed): nobody is graded by it, never a 0."""


NOT_GRADED = "not graded: the sandbox could not start"

_BWRAP: "tuple[bool, str] | None" = None

FIX = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
       "bubblewrap`) and allow user namespaces (`sudo sysctl -w kernel.unprivileged_userns_clone=1`, or "
       "`kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu 24.04); or grade anyway, unprotected, with "
       "--insecure")


def bwrap_status() -> tuple[bool, str]:
    """(usable, why not): bubblewrap is installed and can make the namespaces (tried once, then cached).
    COURSE_SANDBOX=none turns it off (today's unsandboxed child)."""
    global _BWRAP
    if settings.sandbox_off():
        return False, "the sandbox is turned off (COURSE_SANDBOX=none)"
    if _BWRAP is not None:
        return _BWRAP
    exe = shutil.which("bwrap")
    if exe is None:
        _BWRAP = (False, "bubblewrap (bwrap) is not installed")
        return _BWRAP
    try:
        r = subprocess.run([exe, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                            "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)
        _BWRAP = (True, "") if r.returncode == 0 else (
            False, f"bubblewrap cannot make its namespaces here ({r.stderr.decode(errors='replace').strip()[:200]})")
    except (OSError, subprocess.TimeoutExpired) as exc:
        _BWRAP = (False, f"bubblewrap did not run ({exc})")
    return _BWRAP


def insecure() -> bool:
    return settings.current().insecure


def require_sandbox() -> None:
    """Raise SandboxUnavailable (with the fix) unless bwrap works here or --insecure was given."""
    ok, why = bwrap_status()
    if not ok and not insecure():
        raise SandboxUnavailable(f"class grading runs every submission in a sandbox, and {why}: {FIX}")


_NOTICE_SHOWN = False


def fallback_notice() -> str | None:
    """The one-line notice `course check` prints when it grades without the sandbox (once per process)."""
    global _NOTICE_SHOWN
    ok, why = bwrap_status()
    if ok or _NOTICE_SHOWN:
        return None
    _NOTICE_SHOWN = True
    return f"note: {why}; your notebook runs unsandboxed, as your own user (fine for your own code)"


_SYSTEM_TOPS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
                 "/etc/fonts", "/etc/ssl/certs")
# folders a mask may never cover: the loader and the system's libraries live there
_ESSENTIAL = ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/share", "/etc")

# Folders hidden from every child even where they lie inside a folder the sandbox shows (a class folder or a
# course checkout under /usr, say); class grading adds the folders it grades (course_cli.classes.batch).
HIDDEN_PATHS: set[str] = set()


def _inside(p: str, top: str) -> bool:
    """`p` is `top` or below it (both real paths)."""
    return p == top or p.startswith(top.rstrip(os.sep) + os.sep)


def _python_files() -> dict:
    """What the child needs to run this Python and import the installed packages, as an explicit list:
    the interpreter, its shared library, the standard library and the site-packages folders (only those),
    never sys.prefix, sys.path or anything found from where the grader was started.

    {"exe": real interpreter, "links": [(target, link)], "files": [files], "dirs": [folders],
     "mask": [folders inside those to hide]}"""
    exe = os.path.realpath(sys.executable)
    links, files, dirs, mask = [], [], [], []
    if os.path.abspath(sys.executable) != exe:
        links.append((exe, os.path.abspath(sys.executable)))
    cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))), "pyvenv.cfg")
    if os.path.isfile(cfg):
        files.append(cfg)  # a venv: the interpreter reads it to find its site-packages
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    for name in {sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")}:
        if name and os.path.exists(os.path.join(libdir, name)) and not any(
                _inside(os.path.realpath(libdir), t) for t in _SYSTEM_TOPS):
            for f in sorted(Path(libdir).glob(name.split(".so")[0] + ".so*")):
                files.append(str(f))
    stdlib = os.path.realpath(sysconfig.get_path("stdlib"))
    platstdlib = os.path.realpath(sysconfig.get_path("platstdlib"))
    dirs += [stdlib, os.path.join(platstdlib, "lib-dynload")]
    zipped = os.path.join(os.path.dirname(stdlib), f"python{sys.version_info[0]}{sys.version_info[1]}.zip")
    if os.path.isfile(zipped):
        files.append(zipped)
    sites = set()
    for sp in [*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]:
        if sp and os.path.isdir(sp) and os.path.basename(sp.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            sites.add(os.path.realpath(sp))
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and user in sys.path and os.path.isdir(user):  # pip install --user: a site-packages folder too
        sites.add(os.path.realpath(user))
    sites |= _pth_sites(sites)
    dirs += sorted(sites)
    # the base interpreter's own site-packages, inside its standard library, is not this environment's
    for sub in ("site-packages", "dist-packages"):
        base_sp = os.path.join(stdlib, sub)
        if os.path.isdir(base_sp) and os.path.realpath(base_sp) not in sites:
            mask.append(base_sp)
    files = [f for f in dict.fromkeys(files) if f != exe]
    return {"exe": exe, "links": links, "files": files, "dirs": [d for d in dirs if os.path.isdir(d)], "mask": mask}


def _pth_sites(sites: "set[str]") -> "set[str]":
    """The site-packages folders that a .pth file in one of `sites` names (a venv that borrows another
    environment's packages): the child's interpreter reads the same .pth and needs them. Only folders named
    site-packages or dist-packages: a .pth line naming any other folder (an editable checkout) shows nothing."""
    found = set()
    for sp in sites:
        for pth in sorted(Path(sp).glob("*.pth"))[:200]:
            try:
                lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()[:1000]
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                d = os.path.realpath(os.path.join(sp, line))
                if os.path.isdir(d) and os.path.basename(d) in ("site-packages", "dist-packages"):
                    found.add(d)
    return found - sites


def limits():
    """The limits of the run this process is in (course_cli/settings.py: a command's options, a Dask task's
    shipped settings, else the environment's now)."""
    return settings.current().limits


def _hidden(shown: "list[str]") -> list[str]:
    """The folders to cover with an empty read-only tmpfs: the course checkout, the grader's working folder,
    the reference cache and the graded folders, wherever one lies inside a folder the sandbox shows."""
    root = os.path.realpath(ROOT)
    cands = set(HIDDEN_PATHS)
    if (ROOT / "solutions").exists() or (ROOT / "tests").exists():
        cands.add(root)  # a checkout: solutions/ and tests/ beside graders/ (an installed package holds neither)
    try:
        cands.add(os.getcwd())
    except OSError:
        pass
    cands.add(str(settings.cache_dir()))
    out = []
    for c in sorted({os.path.realpath(c) for c in cands if c}):
        if c == "/" or any(_inside(e, c) for e in _ESSENTIAL):
            continue  # covering it would hide the system
        if any(_inside(c, t) and c != t for t in shown):
            out.append(c)
    return [c for c in out if not any(c != o and _inside(c, o) for o in out)]


_SIZES: "bool | None" = None


def _bwrap_sizes() -> bool:
    """Whether this bubblewrap sizes a tmpfs (`--size`, bubblewrap >= 0.7; Ubuntu 22.04 has 0.6.1)."""
    global _SIZES
    if _SIZES is None:
        try:
            r = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True, timeout=10)
            _SIZES = "--size" in (r.stdout + r.stderr)
        except (OSError, subprocess.SubprocessError):
            _SIZES = False
    return _SIZES


def _bwrap_argv(out: Path, device: str, visible: list[Path], env: dict, graders: "Path | None" = None,
                lim=None, out_size: int | None = None) -> list[str]:
    """The sandbox's world, from an explicit list (see _python_files): the system's /usr and the loader's
    paths, this Python, its standard library and site-packages, the course code the child imports, the
    `visible` paths and its own output folder. Nothing is bound because of where the grader was started.
    `graders`: the folder shown as graders/ (a student's child gets the child build, without the answers).
    `out_size`: the output folder is a tmpfs of that size inside the sandbox (with only the host folder's
    job.json bound into it), never the grader's disk; the parent reads it through the descriptor the child
    sends (see Child.files). None binds the host folder itself (the warm zygote's jobs folder)."""
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--uid", "1000", "--gid", "1000", "--hostname", "sandbox", "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    # the private /tmp first: binds below it (a venv or a notebook folder under /tmp) are mounted on top
    lim = lim or limits()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    if _bwrap_sizes():
        argv += ["--size", str(lim.tmp if device != "cuda" else 8 * lim.tmp), "--tmpfs", "/tmp",
                 "--size", str(lim.shm), "--tmpfs", "/dev/shm"]
    else:  # bubblewrap < 0.7 (Ubuntu 22.04's 0.6) sizes no tmpfs: /tmp and /dev/shm are folders of the output
        # folder, whose total the parent watches (the write limit), so the child alone pays for filling them
        for name, target in ((".tmp", "/tmp"), (".shm", "/dev/shm")):
            (out / name).mkdir(exist_ok=True)
            argv += ["--bind", str(out / name), target]
    shown = []
    for top in _SYSTEM_TOPS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
            shown.append(top)
    for f in _SYSTEM_FILES:
        if os.path.exists(f):
            argv += ["--ro-bind", f, f]
    py = _python_files()
    course_dirs = [str((ROOT / sub).resolve()) for sub in ("graders", "course_cli")]
    system = list(shown)
    shown += py["dirs"]
    masks = py["mask"] + _hidden(shown)

    def covered(p: str) -> bool:  # already in view through a system folder, and not under a mask
        return any(_inside(p, t) for t in system) and not any(_inside(p, m) for m in masks)

    # parents before children: a mask inside a site-packages folder covers part of it, a site-packages
    # folder inside a masked folder (a venv inside a hidden checkout) shows through
    layers = [(d, "bind") for d in [py["exe"], *py["files"], *py["dirs"]] if not covered(d)]
    layers += [(m, "mask") for m in masks]
    for path, kind in sorted(layers, key=lambda x: (x[0].count(os.sep), x[1] == "mask")):
        argv += ["--ro-bind", path, path] if kind == "bind" else \
            [*(["--size", str(2**20)] if _bwrap_sizes() else []), "--tmpfs", path]
    for target, link in py["links"]:
        if not covered(link):
            argv += ["--symlink", target, link]
    for d in course_dirs:
        src = str(graders) if graders is not None and d == course_dirs[0] else d
        argv += ["--ro-bind", src, d]
    for p in visible:
        p = Path(p).resolve()
        if p.exists():
            argv += ["--ro-bind", str(p), str(p)]
    if out_size is not None:
        argv += ["--size", str(out_size), "--tmpfs", str(out), "--ro-bind", str(out / "job.json"),
                 str(out / "job.json")]
    else:
        argv += ["--bind", str(out), str(out)]
    for m in masks:
        argv += ["--remount-ro", m]
    if device == "cuda":  # the device nodes CUDA opens, and the driver's view of the hardware (read-only)
        for dev in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(dev), str(dev)]
        for sys_dir in ("/sys/devices", "/sys/bus", "/sys/class", "/sys/dev", "/sys/module"):
            if os.path.isdir(sys_dir):
                argv += ["--ro-bind", sys_dir, sys_dir]
    # the root and /dev (tmpfs that bubblewrap makes, without a size) read-only: the child writes only to its
    # sized /tmp and /dev/shm and to its output folder
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(out), "--"]
    return argv


# The child's environment, by exact name (never by prefix: a planted NVIDIA_API_KEY or TORCH_HUB_TOKEN stays
# out): thread counts, the GPUs it may use and how CUDA allocates, nothing else of the grader's.
ENV_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "KMP_AFFINITY", "KMP_BLOCKTIME", "OMP_PROC_BIND", "OMP_PLACES",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING",
             "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
             "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "TORCH_CUDA_ARCH_LIST",
             "TORCH_SHOW_CPP_STACKTRACES", "TRITON_INTERPRET", "TRITON_PTXAS_PATH", "MALLOC_ARENA_MAX")


def _user_site() -> list[str]:
    """The user's site-packages when this Python uses it (the child's HOME differs, so it is named)."""
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return [user] if user and user in sys.path and os.path.isdir(user) else []


def child_env(device: str, bench: bool, sandboxed: bool) -> dict:
    """The child's whole environment: the variables named in ENV_NAMES and a few of ours, never the grader's
    secrets."""
    env = {k: os.environ[k] for k in ENV_NAMES if k in os.environ}
    venv_bin = os.path.dirname(sys.executable)
    env.update({"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                "PYTHONPATH": os.pathsep.join([str(ROOT), *_user_site()]), "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
                "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "4")})
    if sandboxed:
        env.update({"HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/.matplotlib",
                    "TRITON_CACHE_DIR": "/tmp/.triton", "TORCHINDUCTOR_CACHE_DIR": "/tmp/.inductor",
                    "COURSE_SANDBOXED": "1"})
    else:
        for k in ("HOME", "TMPDIR", "USER", "COURSE_WORKSPACE"):
            if k in os.environ:
                env[k] = os.environ[k]
    if not bench:
        # Probes are small: one thread each avoids OpenMP threads spinning against the parent and the
        # reference child on a two-core machine. (Benchmarks keep torch's default.)
        env.setdefault("OMP_NUM_THREADS", "1")
    if device == "cuda":
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"  # before anything in the child imports triton
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


# ----------------------------------------------------------------------------------------------
# A cgroup per child, for a process limit and a complete kill (only where the cgroup tree is writable)

_CGROUP_BASE: "Path | None | bool" = False  # False: not looked up yet
_counter = itertools.count(1)


def _cgroup_base() -> Path | None:
    """The pids cgroup this process is in, if we may create cgroups under it (v1 `pids` or v2)."""
    global _CGROUP_BASE
    if _CGROUP_BASE is not False:
        return _CGROUP_BASE
    base = None
    if settings.cgroups():
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                if "pids" in controllers.split(","):
                    cand = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
                elif controllers == "" and "pids" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split():
                    cand = Path("/sys/fs/cgroup") / path.lstrip("/")
                else:
                    continue
                if os.access(cand, os.W_OK) and (cand / "cgroup.procs").exists():
                    base = cand
                    break
        except (OSError, ValueError):
            base = None
    _CGROUP_BASE = base
    if base is not None:
        _sweep(base)
    return base


def _sweep(base: Path) -> None:
    """Remove the cgroups (and kill the processes) that graders which died without cleaning up left."""
    try:
        for cg in base.glob("course-*-*"):
            owner = int(cg.name.split("-")[1])
            try:
                os.kill(owner, 0)
                continue  # its grader is still running
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            _cgroup_kill(cg)
            _remove_cgroup(cg)
    except (OSError, ValueError):
        pass


_MEM_BASE: "Path | None | bool" = False  # False: not looked up yet


def _memory_base() -> Path | None:
    """The memory cgroup this process is in, if we may create cgroups under it: cgroup v1's memory controller
    (root), or cgroup v2 with the memory controller enabled for our subtree (root, or a delegated cgroup, as
    systemd-run --user --scope -p Delegate=yes gives)."""
    global _MEM_BASE
    if _MEM_BASE is not False:
        return _MEM_BASE
    base = None
    if settings.cgroups():
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                if "memory" in controllers.split(","):
                    cand = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
                    knob = "memory.limit_in_bytes"
                elif controllers == "" and "memory" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split():
                    cand = Path("/sys/fs/cgroup") / path.lstrip("/")
                    knob = "memory.max"
                    if "memory" not in (cand / "cgroup.subtree_control").read_text().split():
                        continue
                else:
                    continue
                if os.access(cand, os.W_OK) and (cand / "cgroup.procs").exists():
                    base = cand
                    _MEM_KNOB[0] = knob
                    break
        except (OSError, ValueError):
            base = None
    _MEM_BASE = base
    if base is not None and base != _cgroup_base():
        _sweep(base)
    return base


_MEM_KNOB = ["memory.max"]


def _new_memory_cgroup(limit: int) -> Path | None:
    """A memory cgroup for one child, capped at `limit` bytes: its heap and the pages of the tmpfs it writes
    (/tmp, /dev/shm) together; past it the kernel's OOM killer kills in that cgroup alone, never the grader.
    With cgroup v2 the pids cgroup is the same one (see _new_cgroup)."""
    base = _memory_base()
    if base is None:
        return None
    cg = base / f"course-{os.getpid()}-{next(_counter)}"
    try:
        cg.mkdir(exist_ok=True)
        (cg / _MEM_KNOB[0]).write_text(str(limit))
        if _MEM_KNOB[0] == "memory.max":
            try:
                (cg / "memory.swap.max").write_text("0")
            except OSError:
                pass
        return cg
    except OSError:
        _remove_cgroup(cg)
        return None


def capped_memory(cgroup: Path | None, cap: int) -> Path | None:
    """The memory cgroup of whatever `cgroup` (the pids cgroup, or None) will hold, capped at `cap` bytes: on
    cgroup v2 the same cgroup, else a memory cgroup of its own (None where none can be made)."""
    if cgroup is not None and _memory_base() == _cgroup_base():  # cgroup v2: one cgroup holds both limits
        try:
            (cgroup / "memory.max").write_text(str(cap))
            return cgroup
        except OSError:
            return None
    return _new_memory_cgroup(cap)


def oom_kills(cg: Path | None) -> int:
    """How many times the kernel's OOM killer killed in this memory cgroup (0 without one)."""
    if cg is None:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (cg / name).read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill":
                    return int(v)
        except (OSError, ValueError):
            pass
    return 0


def _oom_killed(cg: Path | None) -> bool:
    """Did the kernel's OOM killer kill in this memory cgroup?"""
    return oom_kills(cg) > 0


def _new_cgroup(limit: int) -> Path | None:
    base = _cgroup_base()
    if base is None:
        return None
    cg = base / f"course-{os.getpid()}-{next(_counter)}"
    try:
        cg.mkdir()
        (cg / "pids.max").write_text(str(limit))
        return cg
    except OSError:
        _remove_cgroup(cg)
        return None


def _cgroup_kill(cg: Path) -> None:
    """SIGKILL every process in the cgroup until it is empty (a fork loop cannot outrun pids.max)."""
    for _ in range(200):
        try:
            pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)


def _remove_cgroup(cg: Path) -> None:
    for _ in range(100):
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy: killed processes are still exiting
            time.sleep(0.01)


@dataclass
class Child:
    proc: subprocess.Popen
    out: Path
    deadline: float
    memory_limit: int | None
    job: dict
    returncode: int | None = None
    timed_out: bool = False
    elapsed: float = 0.0
    started: float = field(default_factory=time.monotonic)
    cgroup: Path | None = None
    notebook_limit: float | None = None  # the per-notebook limit, when it is what bounds this child
    sandboxed: bool = False  # inside bubblewrap
    stopped_phase: str | None = None  # the phase (cell, exercise) killed from outside at its limit
    schedule: list = field(default_factory=list)  # [(phase, limit)] in order, made here before the child started
    mem_cgroup: Path | None = None  # the memory cgroup (v1's, or the same one as `cgroup` on v2)
    mem_cap: int | None = None  # its limit, when there is one
    oom_killed: bool = False  # the kernel's OOM killer killed in it
    write_limit: int | None = None  # bytes its output folder may hold, in all
    over_written: int = 0  # how many it held when it was stopped for it
    setup_err: object = None  # a private file with what bubblewrap said
    report: "object | None" = None  # our end of the socket the child sends its output folder's descriptor on
    view: int | None = None  # that descriptor: the folder as the child saw it (a tmpfs of its own, or `out`)
    sized: bool = False  # its output folder is a tmpfs of write_limit bytes: the kernel refuses more

    @property
    def files(self) -> Path:
        """Where to read what the child wrote: its output folder through the descriptor it sent (a sized tmpfs
        that lives on after the sandbox while we hold it), else the host folder (a child that never sent it)."""
        return Path(f"/proc/self/fd/{self.view}") if self.view is not None else self.out

    def _take_view(self) -> None:
        """Receive the output folder's descriptor, sent by course_cli.sandboxed.child before any student code
        ran (non-blocking: at most one, a directory, else nothing)."""
        if self.report is None or self.view is not None:
            return
        try:
            _, fds, _, _ = socket.recv_fds(self.report, 16, 4, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            fds = []
        keep = None
        for fd in fds:
            try:
                ok = keep is None and stat.S_ISDIR(os.fstat(fd).st_mode)
            except OSError:
                ok = False
            if ok:
                keep = fd
            else:
                os.close(fd)
        self.view = keep
        self.report.close()
        self.report = None

    def _written(self) -> int:
        """Bytes in the output folder: the tmpfs's own count when it is sized (the kernel caps it; one call),
        else a walk of the host folder, stopped past the limit."""
        if self.sized:
            if self.view is None:
                return 0
            try:
                st = os.fstatvfs(self.view)
            except OSError:
                return 0
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            # full (less than one MiB left: a writer past it got "No space left on device") counts as over
            return max(used, self.write_limit + 1) if st.f_bavail * st.f_frsize < 2**20 else used
        return tree_size(self.files, self.write_limit)

    @property
    def never_started(self) -> bool:
        """The sandbox ended before the child ran a line of its own (it writes `progress` first thing, before
        any of the notebook's code): bubblewrap could not set it up. Never the notebook's doing."""
        return (self.sandboxed and self.returncode not in (0, None) and not self.timed_out
                and not os.path.lexists(self.files / "progress"))

    def sandbox_error(self) -> str:
        """What bubblewrap said (the last lines), for the instructor."""
        if self.setup_err is None:
            return ""
        try:
            self.setup_err.seek(0)
            text = self.setup_err.read(4000).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return for_terminal(text[-600:], newlines=False)

    def raise_if_never_started(self) -> None:
        if self.never_started:
            why = self.sandbox_error() or f"bubblewrap exited with {self.returncode}"
            raise SandboxFailed(f"{NOT_GRADED} ({why}); check it with `python -m course_cli.sandboxed.sandbox "
                                f"smoke`: {FIX}")

    def _phase_limit(self, phase: str) -> float:
        k = self._phase_index(phase)
        if k is not None:
            return float(self.schedule[k][1])
        if phase.startswith("running cell"):
            return float(self.job["cell_timeout"])
        if phase.startswith(("checking", "probing mistake", "benchmarking")):
            return float(self.job["exercise_timeout"])
        return STARTUP_ALLOWANCE

    def _phase_index(self, phase: str) -> int | None:
        """Where `phase` stands in the parent's schedule; None for a name the schedule does not hold."""
        for k, (name, _) in enumerate(self.schedule):
            if phase == name or name == "probing mistake" and phase.startswith("probing mistake "):
                return k
        return None

    def wait(self) -> "Child":
        """Wait for the child, on this process's own clock and schedule: the phases (startup, each cell, each
        exercise, done) and their limits were set here before the child started. The child's `progress`
        file can only shorten its run: a phase counts only when it is later in the schedule than the one the
        child was in (a name not in the schedule, or an earlier one, changes nothing), each phase is killed
        GRACE seconds past its own limit (a child that ignores the alarm), and reaching phase k at time t
        brings the whole child's deadline down to t + the limits of the phases left. Either way, kill
        whatever it left running (the sandbox, its process group, everything in its cgroup)."""
        pos, name, since = 0, self.schedule[0][0] if self.schedule else None, time.monotonic()
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                self.timed_out = True
                break
            try:
                self.returncode = self.proc.wait(timeout=min(0.2, max(0.0, self.deadline - now)))
                break
            except subprocess.TimeoutExpired:
                pass
            self._take_view()
            if self.write_limit is not None:
                used = self._written()
                if used > self.write_limit:
                    self.over_written = used
                    break
            if not self.schedule:
                continue
            current, now = self.progress, time.monotonic()
            k = self._phase_index(current)
            # a later phase; or, for the reference child (trusted code), the next of its mistakes
            if k is not None and (k > pos or k == pos and current != name and self.job.get("mistakes")):
                pos, name, since = k, current, now
                if not self.job.get("mistakes"):  # (the reference child's mistakes have a budget of their own)
                    self.deadline = min(self.deadline, now + sum(lim for _, lim in self.schedule[k:]) + GRACE)
            elif now - since > self.schedule[pos][1] + GRACE:
                self.timed_out, self.stopped_phase = True, name
                break
        self.kill_all()
        if self.returncode is None:
            self.returncode = self.proc.wait()
        self._take_view()  # sent before it ended: still in the socket
        if self.write_limit is not None and not self.over_written:  # it filled the folder, then ended (or was
            used = self._written()  # killed) before the next look: the same verdict whatever the timing
            if used > self.write_limit:
                self.over_written = used
        self.elapsed = time.monotonic() - self.started
        return self

    def kill_all(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:
            _cgroup_kill(self.cgroup)
        if self.mem_cgroup is not None:
            _cgroup_kill(self.mem_cgroup)
            self.oom_killed = self.oom_killed or _oom_killed(self.mem_cgroup)
        for cg in dict.fromkeys(c for c in (self.cgroup, self.mem_cgroup) if c is not None):
            _remove_cgroup(cg)
        self.cgroup = self.mem_cgroup = None

    def cleanup(self) -> None:
        """Remove the child's output folder (after the sandbox is dead), however deep or large: the host folder,
        and the sized tmpfs by letting go of its last reference."""
        if self.report is not None:
            self.report.close()
            self.report = None
        if self.view is not None:
            os.close(self.view)
            self.view = None
        remove_tree(self.out)
        if self.setup_err is not None:
            self.setup_err.close()
            self.setup_err = None

    def text(self, name: str, limit: int = 4000) -> str:
        """The last `limit` bytes of a regular file the child wrote ("" for anything else)."""
        return readback.read_tail(self.files / name, limit)

    def json(self, name: str):
        """JSON the child wrote, or None when it is missing or not something the grader reads."""
        try:
            return readback.read_json(self.files / name)
        except readback.ReadBackError:
            return None

    @property
    def progress(self) -> str:
        return self.text("progress", 200).strip()

    def death(self) -> str | None:
        """Why the child ended early, in words, or None if it finished."""
        where = self.progress or "starting"
        if self.over_written:
            return (f"output limit exceeded: the files the notebook's code wrote grew past "
                    f"{self.write_limit / 2**20:g} MiB in all while {where}, so the grader stopped it")
        if self.oom_killed:
            return (f"ran out of memory while {where}: the sandbox's memory cap of {self.mem_cap / 2**30:.1f} GiB "
                    f"(memory and the files in /tmp and /dev/shm together) was reached")
        if self.progress == "done" and not self.timed_out:
            return None
        if self.stopped_phase:
            limit = self._phase_limit(self.stopped_phase)
            what = "cell" if self.stopped_phase.startswith("running cell") else "exercise"
            if self.stopped_phase == "done" or self.stopped_phase.startswith("starting"):
                return (f"timed out while {self.stopped_phase}: it did not move on within {limit:g} s "
                        f"(+{GRACE:g} s), so the grader stopped it")
            return (f"timed out while {self.stopped_phase}: it ran past the {limit:g} s limit of one {what} and "
                    f"did not stop when told to (does it catch or ignore signals?), so the grader stopped it")
        if self.timed_out:
            if self.notebook_limit is not None:
                return (f"timed out while {where}: the notebook ran past its time limit of {self.notebook_limit:g} s "
                        f"(+{STARTUP_ALLOWANCE:g} s to start; at most COURSE_NOTEBOOK_TIMEOUT="
                        f"{limits().notebook_timeout:g} s); "
                        f"an infinite loop?")
            return f"timed out while {where} (limit {self.deadline - self.started:.0f} s); an infinite loop?"
        rc = self.returncode
        if rc is not None and rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            if sig == "SIGKILL":
                return f"the grading process was killed while {where} (out of memory?)"
            if sig == "SIGXFSZ":
                return (f"output limit exceeded: a file grew past {float(self.job.get('file_limit') or 0) / 2**20:g} MiB "
                        f"while {where}")
            return f"the grading process died with {sig} while {where}"
        err = self.text("stderr.txt", 600).strip().splitlines()
        tail = f": {err[-1][:300]}" if err else ""
        if "MemoryError" in tail or "can't allocate" in tail:
            return f"ran out of memory (limit {self.memory_limit / 2**30:.0f} GiB) while {where}"
        if "Traceback (most recent call last)" in tail or 'File "' in tail:
            tail = ""
        if rc and rc > 128 and self.sandboxed:  # bwrap reports a signal death as 128 + signal
            try:
                sig = signal.Signals(rc - 128).name
            except ValueError:
                sig = f"signal {rc - 128}"
            if sig == "SIGKILL":
                return f"the grading process was killed while {where} (out of memory?)"
            return f"the grading process died with {sig} while {where}"
        return f"the notebook's code ended the grading process (exit code {rc}) while {where}{tail}"


def tree_size(path: Path, stop: int | None = None, max_entries: int = 20_000) -> int:
    """Bytes of the regular files under `path` (iteratively, never following links); stops counting past
    `stop`. More than `max_entries` entries count as over any limit."""
    total, todo, seen = 0, [str(path)], 0
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for e in it:
                    seen += 1
                    if seen > max_entries:
                        return 2**62
                    try:
                        if e.is_dir(follow_symlinks=False):
                            todo.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
                    if stop is not None and total > stop:
                        return total
        except OSError:
            pass
    return total


def remove_tree(path: "Path | str") -> None:
    """Remove a folder a child wrote, however deep or wide (never recursion in this process): `rm -rf` when
    there is one, then an iterative walk for what is left (folders without permissions made writable)."""
    path = str(path)
    if not os.path.lexists(path):
        return
    rm = shutil.which("rm")
    if rm:
        subprocess.run([rm, "-rf", "--one-file-system", "--", path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if not os.path.lexists(path):
        return
    stack, expanded = [path], set()
    while stack:
        cur = stack[-1]
        if cur in expanded:  # its folders are gone (or cannot be removed): remove it, or leave it
            stack.pop()
            try:
                os.rmdir(cur)
            except OSError:
                pass
            continue
        expanded.add(cur)
        try:
            os.chmod(cur, 0o700, follow_symlinks=False) if not os.path.islink(cur) else None
            entries = list(os.scandir(cur))
        except (OSError, NotImplementedError):
            entries = []
        subdirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                try:
                    os.unlink(e.path)
                except OSError:
                    pass
        if subdirs:
            stack.extend(subdirs)
            continue
        stack.pop()
        try:
            os.rmdir(cur) if not os.path.islink(cur) else os.unlink(cur)
        except OSError:
            pass


def _limits(memory: int | None, cgroup: Path | None, mem_cgroup: Path | None = None, file_limit: int | None = None,
            nice: int = 0):
    file_limit = file_limit or limits().file

    def apply():
        if nice:
            os.nice(nice)  # inherited by everything it starts (a warm server's idle probes: nice 19)
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        for cg in dict.fromkeys(c for c in (cgroup, mem_cgroup) if c is not None):
            try:
                with open(cg / "cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
    return apply


def make_job(module: str, cells: list[dict], exercises: list[str], device: str, out: "Path | None",
             mistakes: bool = False, only_public: bool = False, bench: bool = False,
             exercise_timeout: float | None = None, hidden_seed: int | None = None, draws: dict | None = None,
             extra: dict | None = None) -> dict:
    """The job course_cli.sandboxed.child runs (every runner's: a fresh child, the warm zygote's fork, in
    process), with this run's limits; `out` None for the zygote, which gives each fork its own folder."""
    lim = limits()
    cuda = device == "cuda"
    ex_t = exercise_timeout or (max(lim.exercise_timeout, lim.gpu_exercise_timeout) if cuda else lim.exercise_timeout)
    return {"module": module, "cells": cells, "exercises": exercises, "device": device,
            **({"out": str(out)} if out is not None else {}),
            "mistakes": mistakes, "only_public": only_public, "bench": bench, "cell_timeout": lim.cell_timeout,
            "exercise_timeout": ex_t, "output_limit": lim.output, "file_limit": lim.file,
            "hidden_seed": hidden_seed, "draws": draws or {},
            **({"mutant_budget": settings.mutant_budget()} if mistakes and settings.mutant_budget() is not None
               else {}), **(extra or {})}


def start(module: str, cells: list[dict], exercises: list[str], device: str = "cpu",
          mistakes: bool = False, only_public: bool = False, exercise_timeout: float | None = None,
          cwd: str | None = None, bench: bool = False, visible: "list[Path] | tuple" = (),
          strict: bool = False, extra_env: dict | None = None, hidden_seed: int | None = None,
          draws: dict | None = None, job_extra: dict | None = None, nice: int = 0) -> Child:
    """Start a child on `cells`; it probes `exercises` on `device` (and the mistakes if asked).

    `visible`: paths the sandboxed child may read besides Python and the graders (the solved notebooks a
    lesson builds on). `strict`: class grading; raise SandboxUnavailable rather than run unsandboxed
    (unless --insecure). `cwd` is used only without the sandbox (inside it the child works in its own folder)."""
    cuda = device == "cuda"
    sandboxed = bwrap_status()[0]
    if strict and not sandboxed:
        require_sandbox()
    lim = limits()
    out = Path(tempfile.mkdtemp(prefix="course-"))
    job = make_job(module, cells, exercises, device, out, mistakes, only_public, bench, exercise_timeout,
                   hidden_seed, draws, job_extra)
    ex_t = job["exercise_timeout"]
    # the child sends its output folder's descriptor on `theirs` before any of the notebook's code runs
    report, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    job["view_fd"] = theirs.fileno()
    (out / "job.json").write_text(json.dumps(job))
    sized = sandboxed and _bwrap_sizes()
    out_size = max(2**20, lim.write - lim.tmp - lim.shm) if sized else None
    env = {**child_env(device, bench, sandboxed), **(extra_env or {})}
    # CUDA reserves more address space than any sane limit. A benchmark keeps torch's threads, and glibc
    # reserves address space for each thread's malloc arena: twice the limit, and at most 4 arenas.
    memory = None if cuda else (2 * lim.memory if bench else lim.memory)
    command = [sys.executable, "-m", "course_cli.sandboxed.child", str(out / "job.json")]
    if sandboxed:
        # a student's child sees the graders without any answer (course_cli.sandboxed.child_build);
        # the reference child, which runs the solved notebook and the mistakes, sees them whole
        graders = None if mistakes else _child_build(module)
        command = _bwrap_argv(out, device, [Path(p) for p in visible], env, graders, lim, out_size) + command
    cgroup = _new_cgroup(lim.pids())
    # memory, heap and tmpfs pages together: the address-space limit (or twice it for CUDA, which has none)
    # plus the child's tmpfs; past it the kernel kills in the child's cgroup, never the grader
    mem_cap = (2 * lim.memory if memory is None or bench else lim.memory) + lim.write + (7 * lim.tmp if cuda else 0)
    mem_cgroup = capped_memory(cgroup, mem_cap)
    # what bubblewrap says when it cannot set the sandbox up (the child sends its own stderr to its folder)
    setup_err = tempfile.TemporaryFile() if sandboxed else None
    try:
        proc = subprocess.Popen(command, cwd=str(out) if sandboxed else (cwd or str(out)), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=setup_err if setup_err is not None else subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_limits(memory, cgroup, mem_cgroup, lim.file, nice),
                                pass_fds=(theirs.fileno(),))
    except BaseException:
        report.close()
        theirs.close()
        for cg in (cgroup, mem_cgroup):
            if cg is not None:
                _remove_cgroup(cg)
        remove_tree(out)
        if setup_err is not None:
            setup_err.close()
        raise
    theirs.close()
    # the whole child's wall-clock budget: the sum of its cells' and exercises' limits, and for a
    # student's notebook at most the notebook limit; the reference child (mistakes=True) runs trusted code
    work = lim.cell_timeout * max(1, len(cells)) + ex_t * len(exercises) + (ex_t if bench else 0)
    notebook_limit = None
    if mistakes:
        work += ex_t * 20
    elif not bench:
        work = notebook_limit = min(work, lim.notebook_timeout)
    return Child(proc, out, time.monotonic() + STARTUP_ALLOWANCE + work, memory, job, cgroup=cgroup,
                 notebook_limit=notebook_limit, sandboxed=sandboxed, schedule=_schedule(job),
                 mem_cgroup=mem_cgroup, mem_cap=mem_cap if mem_cgroup is not None else None,
                 write_limit=out_size if sized else lim.write, setup_err=setup_err, report=report, sized=sized)


def _child_build(module: str) -> Path:
    """The graders folder a student's child of lesson `module` sees (built once per version, cached)."""
    lesson = next((l for l in LESSONS if l.module == module), None)
    try:
        return child_build(settings.cache_dir(), lesson)
    except ChildBuildUntrusted as exc:  # a build planted in the cache: nobody is graded by it, never a 0
        raise SandboxFailed(str(exc)) from None


def _schedule(job: dict) -> list:
    """The child's phases in the order it runs them, each with its limit (what the child writes in its
    progress file as it goes): the parent's own plan, from the job it wrote."""
    cell_t, ex_t = float(job["cell_timeout"]), float(job["exercise_timeout"])
    plan = [("starting: importing torch", STARTUP_ALLOWANCE)]
    plan += [(f"running cell {c['index']}", cell_t) for c in job["cells"]]
    if job.get("bench"):
        plan.append(("benchmarking", ex_t))
    else:
        plan += [(f"checking {name}", ex_t) for name in job["exercises"]]
        if job.get("mistakes"):
            plan.append(("probing mistake", ex_t))
    plan.append(("done", GRACE))
    return plan


def smoke() -> tuple[bool, str]:
    """Start one real sandboxed child (this Python, the course code, the allowlisted mounts) that imports the
    child's module and torch: (ok, what went wrong and how to fix it)."""
    ok, why = bwrap_status()
    if not ok:
        return False, f"the sandbox cannot run here: {why}: {FIX}"
    out = Path(tempfile.mkdtemp(prefix="course-smoke-"))
    try:
        env = child_env("cpu", False, True)
        argv = _bwrap_argv(out, "cpu", [], env) + [sys.executable, "-c",
                                                    "import torch, course_cli.sandboxed.child; print('ok')"]
        try:
            r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{NOT_GRADED} ({exc}): {FIX}"
        if r.returncode != 0 or r.stdout.strip() != b"ok":
            err = r.stderr.decode("utf-8", "replace").strip()[-600:]
            return False, f"{NOT_GRADED} (exit {r.returncode}: {err}): {FIX}"
        return True, "the sandbox starts: a child imported torch and the course inside it"
    finally:
        remove_tree(out)


if __name__ == "__main__":  # python -m course_cli.sandboxed.sandbox smoke  (Gradescope's setup.sh runs it)
    if sys.argv[1:] != ["smoke"]:
        print("usage: python -m course_cli.sandboxed.sandbox smoke", file=sys.stderr)
        sys.exit(2)
    good, message = smoke()
    print(message, file=sys.stdout if good else sys.stderr)
    sys.exit(0 if good else 1)
