"""Issue 45: the cluster's certificates (`cluster.make_certificates`, the commands of docs/deploying.md) are made
by openssl in a private folder of their own and written into the given folder as course_cli/atomic.py writes:
a link planted at a certificate's name (another user's, in a shared folder) is replaced, never written through.
Before, openssl wrote `-keyout ca.key` through the link. (openssl is a process: the slow tier.)"""

from __future__ import annotations

import os
import stat

import pytest

pytestmark = pytest.mark.slow


def test_certificates_are_not_written_through_links(tmp_path):
    from course_cli.classes import cluster

    if not cluster.shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    v = tmp_path / "precious.txt"
    v.write_text("the user's own file")
    certs = tmp_path / "certs"
    certs.mkdir()
    for name in ("ca.key", "ca.pem", "client.key", "client.pem"):
        (certs / name).symlink_to(v)
    made = cluster.make_certificates(certs, roles=("client",), days=1)
    assert v.read_text() == "the user's own file"
    for name in ("ca.key", "ca.pem", "client.key", "client.pem"):
        st = os.lstat(certs / name)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, name
    assert made["client"] == (certs / "client.pem", certs / "client.key")
    assert b"PRIVATE KEY" in (certs / "client.key").read_bytes()
    assert not list(certs.glob("*.csr")) and not list(certs.glob(".*"))  # openssl's work stays in its own folder
