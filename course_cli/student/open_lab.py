"""Is a notebook open in a running JupyterLab? Asked before `course reset` rewrites it.

JupyterLab (without real-time collaboration) never reloads a notebook that changed on disk: the next save, or
autosave, brings its "File Changed" dialog, whose default button, Overwrite, puts the old notebook back over
the reset. So reset asks every Jupyter server of this user (their runtime files, as `jupyter server list
--json` reads them) whose root holds the notebook whether a session has it open, and when one has, tells the
student exactly what to do. A server that does not answer within a second counts as not having it open.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

TIMEOUT = 1.0


def running_servers() -> list[dict]:
    """The running Jupyter servers' runtime info (url, token, root_dir, pid); [] when jupyter_server is absent."""
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return []
    try:
        return list(list_running_servers())
    except Exception:  # an unreadable runtime file is no reason to stop a reset
        return []


def _relative(notebook: Path, root: str) -> str | None:
    try:
        return notebook.resolve().relative_to(Path(root).expanduser().resolve()).as_posix()
    except (ValueError, OSError):
        return None


def open_in(notebook: Path, servers: list[dict] | None = None) -> list[str]:
    """The URLs of the running servers with a session (an open notebook tab or kernel) on `notebook`."""
    found = []
    for info in running_servers() if servers is None else servers:
        rel = _relative(notebook, info.get("root_dir") or info.get("notebook_dir") or "")
        if rel is None:
            continue
        url = str(info.get("url", "")).rstrip("/") + "/api/sessions"
        req = urllib.request.Request(url, headers={"Authorization": f"token {info.get('token', '')}"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
                sessions = json.loads(r.read().decode("utf-8", "replace"))
        except (OSError, ValueError):
            continue
        if any(isinstance(s, dict) and urllib.parse.unquote(str(s.get("path", ""))).lstrip("/") == rel
               for s in sessions if isinstance(sessions, list)):
            found.append(str(info.get("url", "")))
    return found


def reload_advice(notebook: Path, urls: list[str]) -> str:
    """What to do in JupyterLab after the notebook was rewritten under it."""
    return (f"{notebook.name} is open in JupyterLab ({urls[0]}): there, choose File → Reload Notebook from Disk "
            "now, before anything saves it. If a \"File Changed\" dialog comes first, choose Revert, not "
            "Overwrite: Overwrite would put your old code back over the reset.")
