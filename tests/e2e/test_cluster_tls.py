"""Dask only over mutual TLS, end to end: a second local user cannot join the course's cluster, and the
multi-machine deployment of docs/deploying.md (openssl certificates, `dask scheduler`, two `dask worker`s,
`course grade --scheduler tls://...`) run on this machine gives local grading's results.

Every process these tests start listens on 127.0.0.1 only, is bounded in time and is stopped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.classes import batch, cluster
from course_cli.classes.journal import result_to_dict
from course_cli.main import cli
from graders.registry import ROOT, find_lesson
from harness import PEAK, mistakes_of, with_mistake

pytest.importorskip("distributed")

L01 = find_lesson("lesson01")
ENV_LIMITS = {"COURSE_CELL_TIMEOUT": "3", "COURSE_EXERCISE_TIMEOUT": "6"}
SITE = Path(__import__("distributed").__file__).resolve().parents[1]  # the venv's site-packages


@pytest.fixture(scope="module")
def limits():
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ENV_LIMITS.items():
            mp.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def small(tmp_path_factory, limits):
    """Four submissions (solved, stub, a known mistake, a torn file) and their local grading (2 jobs)."""
    tmp = tmp_path_factory.mktemp("tls-class")
    folder = tmp / "subs"
    folder.mkdir()
    shutil.copy(L01.solution_path, folder / "solved.ipynb")
    shutil.copy(L01.student_path, folder / "stub.ipynb")
    mistake = next(m for m in mistakes_of(L01) if m.id == "no_scaling")
    shutil.copy(with_mistake(L01, mistake, tmp), folder / "mistake.ipynb")
    (folder / "torn.ipynb").write_text('{"cells": [')
    subs = batch.find_submissions(folder, L01)
    local = {s: result_to_dict(r) for s, r in batch.grade_class(L01, subs, jobs=2).items()}
    assert local["solved"]["score"] == 10.0 and local["stub"]["score"] == 0.0
    return folder, subs, local


# ---------------------------------------------------------------------------------------------------------
# Another local user tries to join

ATTACKER = r'''
import json, os, socket, ssl, sys, asyncio

targets, certs = json.loads(sys.argv[1]), sys.argv[2]
out = {"uid": os.getuid()}


def handshake(address, cert=None, key=None):
    """Connect as TLS would: does the server take us (it then speaks Dask), or refuse at the handshake?"""
    host, port = address.split("://", 1)[1].rsplit(":", 1)
    tls = address.startswith("tls://")
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            sock = raw
            if tls:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # we trust anything: the server decides
                if cert:
                    ctx.load_cert_chain(cert, key)
                sock = ctx.wrap_socket(raw)
            sock.settimeout(10)
            data = sock.recv(64)  # (TLS 1.3: the server's verdict on our certificate arrives with the first read)
            return "accepted" if data else "closed"
    except ssl.SSLError as exc:
        return "refused at the TLS handshake: " + (exc.reason or str(exc))
    except OSError as exc:
        return "refused: " + type(exc).__name__ + " " + str(exc)


for address in targets:
    out[address] = {"no certificate": handshake(address),
                    "own certificate": handshake(address, certs + "/client.pem", certs + "/client.key")}

try:
    import distributed
    from distributed.security import Security
except ImportError as exc:
    out["dask"] = "no distributed: " + str(exc)
else:
    scheduler = targets[0]
    own = Security(require_encryption=scheduler.startswith("tls://"), tls_ca_file=certs + "/ca.pem",
                   tls_client_cert=certs + "/client.pem", tls_client_key=certs + "/client.key",
                   tls_worker_cert=certs + "/worker.pem", tls_worker_key=certs + "/worker.key") \
        if scheduler.startswith("tls://") else Security()
    try:
        client = distributed.Client(scheduler, security=own, timeout=10)
        out["client"] = "joined: the workers run as uid " + json.dumps(sorted(set(client.run(os.getuid).values())))
        client.close()
    except Exception as exc:
        out["client"] = "refused: " + type(exc).__name__ + " " + str(exc)[:200]

    async def worker():
        w = distributed.Worker(scheduler, security=own, nthreads=1, host="127.0.0.1", dashboard=False)
        try:
            await asyncio.wait_for(w.start(), 20)
            return "joined as " + w.address
        finally:
            await w.close()

    try:
        out["worker"] = asyncio.run(worker())
    except BaseException as exc:
        out["worker"] = "refused: " + type(exc).__name__ + " " + str(exc)[:200]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def attacker(tmp_path_factory):
    """A second local user (created here, removed after), with a CA and certificates of its own."""
    if os.geteuid() != 0:
        pytest.skip("creating a second local user needs root (useradd); run the slow tier as root to test this")
    for tool in ("useradd", "userdel", "setpriv", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    # the course's Python may live where another user cannot run it (/root/.pyenv): the system's, of the same
    # minor version, with the venv's packages on its path, stands in for the attacker's own installation
    python = next((p for p in (f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}",)
                   if Path(p).exists()), None)
    if python is None:
        pytest.skip(f"no system python{sys.version_info.major}.{sys.version_info.minor} for the second user")
    home = Path("/nonexistent-course-attacker")
    name = f"course-att-{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=30)
    try:
        entry = pwd.getpwnam(name)
        home = Path(tempfile.mkdtemp(prefix="course-attacker-"))  # (pytest's tmp folders are root's, 0700)
        cluster.make_certificates(home / "certs", roles=("client", "worker"))  # its own CA: not the course's
        (home / "attack.py").write_text(ATTACKER)
        for p in [home, *home.rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid)

        def attack(targets: list[str]) -> dict:
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(SITE),
                   "DASK_CONFIG": str(home / "dask"), "TMPDIR": str(home)}
            done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                                   python, str(home / "attack.py"), json.dumps(targets), str(home / "certs")],
                                  env=env, capture_output=True, text=True, timeout=150, cwd=home)
            assert done.returncode == 0, done.stderr[-3000:]
            out = json.loads(done.stdout.strip().splitlines()[-1])
            assert out["uid"] == entry.pw_uid != os.getuid()
            return out

        yield attack
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def _addresses(client) -> list[str]:
    """The scheduler's address, then every worker's and nanny's: everything the cluster listens on."""
    info = client.scheduler_info()
    out = [info["address"]]
    for address, w in info["workers"].items():
        out += [address] + ([w["nanny"]] if w.get("nanny") else [])
    return out


@pytest.mark.slow
def test_another_local_user_cannot_join_the_local_cluster_and_the_class_is_graded_as_locally(small, attacker,
                                                                                             monkeypatch):
    folder, subs, local = small
    started = []
    real = cluster.local_cluster
    monkeypatch.setattr(cluster, "local_cluster", lambda *a, **k: started.append(real(*a, **k)) or started[-1])
    seen: dict = {}

    def attack_once(student, result):
        if not seen:
            from distributed import Client

            with Client(started[0], security=started[0].security) as c:
                targets = _addresses(c)
            seen.update(attacker(targets), targets=targets)

    got = batch.grade_class(L01, subs, scheduler="local", workers=2, on_done=attack_once)
    targets = seen["targets"]
    assert all(t.startswith("tls://127.0.0.1:") for t in targets) and len(targets) == 5  # scheduler, 2 x (worker, nanny)
    for t in targets:  # every port: refused at the handshake, with no certificate or with one of its own CA
        for how, verdict in seen[t].items():
            assert verdict.startswith("refused at the TLS handshake"), (t, how, verdict)
    if "dask" not in seen:  # the attacker's Dask: neither a client nor a worker gets in
        assert seen["client"].startswith("refused") and seen["worker"].startswith("refused"), seen
    assert {s: result_to_dict(r) for s, r in got.items()} == local


@pytest.mark.slow
def test_before_tls_the_same_user_joined_a_plain_tcp_cluster_and_ran_code_as_the_instructor(attacker, limits):
    """What --insecure-cluster still allows (and what `--scheduler local` was before): the attack succeeds."""
    from distributed import Client

    plain = cluster.local_cluster(1, None)
    try:
        with Client(plain) as c:
            targets = _addresses(c)
            seen = attacker(targets)
    finally:
        plain.close()
    assert all(t.startswith("tcp://") for t in targets)
    assert seen[targets[0]]["no certificate"] == "accepted"  # Dask speaks to anyone
    if "dask" not in seen:
        assert seen["client"] == f"joined: the workers run as uid [{os.getuid()}]", seen
        assert seen["worker"].startswith("joined as tcp://127.0.0.1:"), seen


# ---------------------------------------------------------------------------------------------------------
# docs/deploying.md, on this machine

def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.slow
def test_the_documented_tls_deployment_grades_as_locally(small, tmp_path):
    folder, subs, local = small
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    certs = tmp_path / "certs"
    made = cluster.make_certificates(certs)  # the openssl commands of docs/deploying.md
    dask = str(Path(sys.executable).parent / "dask")
    env = {**os.environ, **ENV_LIMITS, "PYTHONPATH": str(ROOT),
           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "2",
           "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}
    tls = lambda role: ["--tls-ca-file", str(made["ca"]), "--tls-cert", str(made[role][0]),  # noqa: E731
                        "--tls-key", str(made[role][1])]
    procs = []
    try:
        sched_file = tmp_path / "scheduler.json"
        procs.append(subprocess.Popen([dask, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                                       "--no-dashboard", "--scheduler-file", str(sched_file), *tls("scheduler")],
                                      env=env, cwd=tmp_path, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=open(tmp_path / "scheduler.log", "wb")))
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            assert procs[0].poll() is None and time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.2)
        time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tls://127.0.0.1:")
        for i in range(2):
            procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--memory-limit", "0",
                                           "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "60",
                                           *tls("worker")], env=env, cwd=tmp_path, start_new_session=True,
                                          stdout=subprocess.DEVNULL,
                                          stderr=open(tmp_path / f"worker{i}.log", "wb")))
        from distributed import Client
        from distributed.security import Security

        sec = Security(require_encryption=True, tls_ca_file=str(made["ca"]), tls_client_cert=str(made["client"][0]),
                       tls_client_key=str(made["client"][1]))
        with Client(address, security=sec, timeout=30) as c:
            c.wait_for_workers(2, timeout=120)
        grade = [sys.executable, "-m", "course_cli", "grade", str(folder), "--lesson", "lesson01", "--seed", "4242"]
        out = tmp_path / "results.json"
        done = subprocess.run([*grade, "--scheduler", address, *tls("client"), "--out", str(out)],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
        assert done.returncode == 1 and "torn" in done.stderr, done.stderr[-2000:]  # (torn: not gradable)
        plain = subprocess.run([*grade, "--scheduler", address.replace("tls://", "tcp://")], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        assert plain.returncode == 2 and "--insecure-cluster" in plain.stderr and "Traceback" not in plain.stderr
        nocert = subprocess.run([*grade, "--scheduler", address, "--tls-ca-file", str(made["ca"])], env=env,
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert nocert.returncode == 2 and "--tls-cert" in nocert.stderr and "Traceback" not in nocert.stderr
    finally:
        _stop(procs[::-1])
    data = json.loads(out.read_text())
    assert "insecure_cluster" not in data
    local_out = tmp_path / "local.json"
    done = subprocess.run([*grade, "--out", str(local_out)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 1, done.stderr[-2000:]
    assert data == json.loads(local_out.read_text())  # the same seed: the same JSON, field by field
    assert data["students"]["solved"]["score"] == 10.0 and data["students"]["stub"]["score"] == 0.0


# ---------------------------------------------------------------------------------------------------------
# The batch's own memory

CLIENT_PEAK_BOUND = 1024 * 2**20  # docs/deploying.md, "The batch's own resources"


@pytest.mark.slow
def test_the_clients_peak_memory_does_not_follow_a_huge_submission(small, tmp_path):
    """The client hashes every submission and ships its bytes: a 3 GiB sparse file (nothing on disk) used to be
    read whole, twice; now neither, and the client's own peak stays under its bound with it in the class."""
    folder, subs, local = small
    klass = tmp_path / "subs"
    shutil.copytree(folder, klass)
    with open(klass / "huge.ipynb", "wb") as f:
        f.truncate(3 * 2**30)
    env = {**os.environ, **ENV_LIMITS, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-c", PEAK, "grade", str(klass), "--lesson", "lesson01", "--scheduler",
                           "local", "--workers", "2", "--out", str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=500)
    peak = int(done.stdout.split("PEAK_KIB")[1].split()[0]) * 1024
    print(f"the client's peak RSS: {peak / 2**20:.0f} MiB")
    assert done.returncode == 1, done.stderr[-2000:]  # (torn and huge: not graded)
    data = json.loads(out.read_text())["students"]
    assert data["solved"]["score"] == 10.0 and data["stub"]["score"] == 0.0
    assert {e["status"] for e in data["huge"]["exercises"]} <= {"error", "not_graded"}
    assert peak < CLIENT_PEAK_BOUND


@pytest.mark.slow
def test_the_local_cluster_serves_nothing_outside_tls(limits):
    """Dask's HTTP pages (the dashboard, a worker's /info and /metrics: task names hold students' names) are plain
    HTTP beside the TLS ports, readable by any local user. Dask starts an HTTP server in every scheduler and worker
    whatever the options; the course gives them no routes. Every socket the cluster's processes listen on is
    either one of the TLS addresses (the attack test: refused at the handshake) or such a server, on 127.0.0.1,
    whose sitemap lists nothing but itself and whose known pages are not there."""
    import urllib.error
    import urllib.request

    import psutil
    from distributed import Client

    def listening(pids) -> set[tuple[str, int]]:
        out = set()
        for pid in pids:
            try:
                conns = psutil.Process(pid).net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            out |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
        return out

    def get(port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""

    me = psutil.Process()
    before = listening([me.pid])
    local = cluster.local_cluster(2, cluster.security_for("local"))
    try:
        with Client(local, security=local.security) as c:
            targets = _addresses(c)
            info = c.scheduler_info()
            ports = listening([me.pid] + [p.pid for p in me.children(recursive=True)]) - before
            tls = {("127.0.0.1", int(t.rsplit(":", 1)[1])) for t in targets}
            http = {port: {path: get(port, path) for path in PAGES} for _, port in ports - tls}
    finally:
        local.close()
    assert all(t.startswith("tls://127.0.0.1:") for t in targets) and len(targets) == 5
    assert tls <= ports and all(ip == "127.0.0.1" for ip, _ in ports), ports
    assert len(http) == 3, http  # the scheduler's and the two workers' HTTP servers, nothing else
    for port, pages in http.items():
        assert pages.pop("/sitemap.json") == (200, '{"paths": ["/sitemap.json"]}'), (port, pages)
        assert {code for code, _ in pages.values()} == {404}, (port, pages)
    assert not info.get("services") or set(info["services"]) <= {"dashboard"}, info


# Dask's own pages, any of which would name the tasks (students) or the workers
PAGES = ("/sitemap.json", "/", "/status", "/info/main/workers.html", "/info/main/logs.html", "/metrics",
         "/json/identity.json", "/json/index.html", "/health", "/tasks.html", "/individual-plots.json")


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask.distributed")
def test_local_clusters_certificates_are_the_runs_own_and_required():
    """(moved from tests/unit/test_cluster_trust.py: openssl makes the certificates, a process)"""
    a, b = cluster.security_for("local"), cluster.security_for("local")
    assert a.require_encryption and a.tls_ca_file and a.tls_ca_file != b.tls_ca_file  # fresh for each run
    assert a.tls_client_cert and a.tls_worker_cert and a.tls_scheduler_key
    assert cluster.security_for("local", cluster.Access(insecure=True)) is None
    assert cluster.security_for("tcp://h:1", cluster.Access(insecure=True)) is None
