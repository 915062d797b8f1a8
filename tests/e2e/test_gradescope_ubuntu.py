"""The Gradescope bundle on the base image Gradescope documents (issue 32): Ubuntu 22.04, as root, in the
/autograder layout. A minimal Ubuntu 22.04 root filesystem is made with debootstrap from Ubuntu's archive (with
universe and jammy-updates, as Gradescope's image has); setup.sh runs inside it as Gradescope runs it (bubblewrap
as the container: private mount and PID namespaces, the root pivoted), installs Ubuntu's python3.11 and
bubblewrap, the course's pinned environment, and starts the sandbox; then run_autograder grades a solved and a
stub submission there.

This machine's pip sources (its wheel folders, index and CA bundle) are bound into the root so that pip reaches
what it reaches here; nothing else of the host is visible. Skipped when not root, without debootstrap, or when
Ubuntu's archive cannot be reached. COURSE_UBUNTU_ROOT=DIR keeps the root filesystem between runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import find_lesson

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
ARCHIVE = "http://archive.ubuntu.com/ubuntu"


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=8):
            return True
    except Exception:  # noqa: BLE001 - offline: skipped
        return False


needs_ubuntu = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("debootstrap") is None or shutil.which("bwrap") is None
    or not _reachable(f"{ARCHIVE}/dists/jammy/Release"),
    reason="needs root, debootstrap and bubblewrap (apt-get install debootstrap bubblewrap) and Ubuntu's archive")

# the host's pip sources, bound read-only at the same paths (what pip reaches from this machine)
PIP_BINDS = ["/opt/wheels", "/opt/pypi", "/opt/pypi-more", "/etc/xdg/pip", "/etc/pip.conf"]


def inside(root: Path, *argv: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """`argv` run as root inside the Ubuntu root filesystem at `root`, as a container runs it: bubblewrap
    pivots to that root in a new mount namespace (a chroot would not do: the kernel refuses a chrooted process
    new user namespaces, which the course's own sandbox needs). The host's DNS, CA bundle and pip
    sources are bound read-only; the environment is Gradescope's bare one."""
    (root / "etc" / "host-ca.pem").touch()
    binds = [a for d in PIP_BINDS if os.path.exists(d) for a in ("--ro-bind", d, d)]
    # the host's /proc as it is: a proc filesystem with parts covered (bubblewrap's own --proc, Docker's masked
    # paths) does not let a nested user namespace mount its own, which the course's sandbox does
    command = ["bwrap", "--bind", str(root), "/", "--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc",
               "--ro-bind", "/sys", "/sys", "--die-with-parent",
               "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf",
               "--ro-bind", "/etc/ssl/certs/ca-certificates.crt", "/etc/host-ca.pem", *binds,
               "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME=/root", "LANG=C.UTF-8", "PIP_CERT=/etc/host-ca.pem", "PIP_RETRIES=0", "PIP_TIMEOUT=5",
               *([f"PIP_FIND_LINKS={os.environ['PIP_FIND_LINKS']}"] if os.environ.get("PIP_FIND_LINKS") else []),
               *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def jammy(tmp_path_factory) -> Path:
    kept = os.environ.get("COURSE_UBUNTU_ROOT")
    root = Path(kept) if kept else tmp_path_factory.mktemp("ubuntu") / "jammy"
    if not (root / "etc" / "os-release").exists():
        r = subprocess.run(["debootstrap", "--no-check-gpg", "--variant=minbase", "--components=main,universe",
                            "jammy", str(root), ARCHIVE], capture_output=True, text=True, timeout=1500)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        with open(root / "etc" / "apt" / "sources.list", "a") as f:
            f.write(f"deb {ARCHIVE} jammy-updates main universe\ndeb {ARCHIVE} jammy-security main universe\n")
    assert 'VERSION_ID="22.04"' in (root / "etc" / "os-release").read_text()
    yield root
    if not kept:
        shutil.rmtree(root, ignore_errors=True)


@needs_ubuntu
def test_setup_sh_and_run_autograder_on_ubuntu_22_04(jammy, tmp_path):
    auto = jammy / "autograder"
    shutil.rmtree(auto, ignore_errors=True)
    (auto / "source").mkdir(parents=True)
    zip_path = tmp_path / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", L01.id, "--out", str(zip_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    zipfile.ZipFile(zip_path).extractall(auto / "source")

    setup = inside(jammy, "bash", "/autograder/source/setup.sh")
    log = setup.stdout + setup.stderr
    assert setup.returncode == 0, log[-4000:]
    assert "the sandbox works: lesson01's solution graded in it, 10/10" in log, log[-4000:]
    assert "python3.11" in log  # Ubuntu 22.04's python3 is 3.10: the bundle brought Ubuntu's 3.11

    shutil.copy(auto / "source" / "run_autograder", auto / "run_autograder")
    for name, source, want in (("solved", L01.solution_path, 10.0), ("stub", L01.student_path, 0.0)):
        shutil.rmtree(auto / "submission", ignore_errors=True)
        shutil.rmtree(auto / "results", ignore_errors=True)
        (auto / "submission").mkdir()
        shutil.copy(source, auto / "submission" / L01.notebook)
        run = inside(jammy, "bash", "/autograder/run_autograder", timeout=900)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        results = json.loads((auto / "results" / "results.json").read_text())
        assert results["score"] == want, (name, results.get("output", "")[:2000])
        assert all(t.get("visibility") in ("visible", "after_published", "hidden", "after_due_date")
                   for t in results["tests"])
