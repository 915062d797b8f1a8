"""Secret hidden inputs: class grading draws the hidden checks' inputs from a seed chosen per run and kept in
the results. A notebook that memorised the answers to the fixed inputs passes those checks in `course check`
and fails them in `course grade`; an honest notebook's verdict does not change from seed to seed."""

from __future__ import annotations

import base64
import io
import json

import nbformat
import pytest
import torch
from click.testing import CliRunner

from course_cli.sandboxed.grading import grade_notebook
from course_cli.main import cli
from graders import engine
from graders.registry import find_lesson
from harness import with_code

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
# the hidden twins of two public checks: the same properties, on inputs drawn from the run's seed
HIDDEN_VALUE_CHECKS = tuple(name + engine.HIDDEN_TWIN for name in ("huge magnitudes (±1e4) give no inf or NaN",
                                                                    "-inf entries get weight 0"))


def _key(x, dim) -> str:
    import hashlib

    t = x.detach().to("cpu", torch.float64).contiguous()
    return hashlib.sha256(t.numpy().tobytes() + repr((tuple(t.shape), dim)).encode()).hexdigest()


def memorised_softmax() -> str:
    """A softmax that returns the reference's answer for every input the fixed seeds produce, and zeros else."""
    import graders.lesson01_sdpa as g
    from graders.parts import import_lesson

    solved = import_lesson("lesson01")
    table = {}

    def recorder(x, dim=-1):
        out = solved.softmax(x, dim)
        table[_key(x, dim)] = out.detach().clone()
        return out

    engine.probe_exercise(g, {"softmax": recorder}, "softmax", engine.CPU)
    blob = io.BytesIO()
    torch.save(table, blob)
    data = base64.b64encode(blob.getvalue()).decode()
    return f'''
import base64, hashlib, io
_TABLE = torch.load(io.BytesIO(base64.b64decode("{data}")), weights_only=True)

def _key(x, dim):
    t = x.detach().to("cpu", torch.float64).contiguous()
    return hashlib.sha256(t.numpy().tobytes() + repr((tuple(t.shape), dim)).encode()).hexdigest()

def softmax(x, dim=-1):
    known = _TABLE.get(_key(x, dim))
    return known.to(x.dtype).clone() if known is not None else torch.zeros_like(x)
'''


def _statuses(exercise: dict) -> dict:
    return {c["name"]: c["status"] for c in exercise["checks"] if c["device"] == "cpu"}


def test_memorised_answers_fail_the_hidden_checks_in_class_grading(tmp_path):
    path = with_code(L01, "softmax", memorised_softmax(), tmp_path, "memoriser.ipynb")
    checked = grade_notebook(L01, path, ["softmax"])  # course check: the fixed seeds
    mine = {c.name: c.status for c in checked.exercises[0].checks if c.device == "cpu"}
    for name in HIDDEN_VALUE_CHECKS:
        assert mine[name] == "passed", (name, mine)  # the memorised answers are right there

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "memoriser.ipynb").write_bytes(path.read_bytes())
    nbformat.write(nbformat.read(L01.solution_path, as_version=4), subs / "honest.ipynb")
    scores = []
    for seed in (11, 12):
        out = tmp_path / f"r{seed}.json"
        r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--seed", str(seed), "--out", str(out)])
        assert r.exit_code == 0, r.output
        data = json.loads(out.read_text())
        assert data["hidden_seed"] == seed  # kept, to repeat the run
        graded = _statuses(data["students"]["memoriser"]["exercises"][0])
        for name in HIDDEN_VALUE_CHECKS:
            assert graded[name] == "failed", (seed, name, graded)
        assert data["students"]["memoriser"]["exercises"][0]["points"] == 0.0
        scores.append(data["students"]["honest"]["score"])
    assert scores == [10.0, 10.0]  # the honest notebook's verdict does not depend on the seed


def test_the_seed_changes_only_the_hidden_inputs():
    import graders.lesson01_sdpa as g

    public = next(c for c in g.CHECKS if not c.hidden)
    hidden = next(c for c in g.CHECKS if c.hidden)
    cfg = engine.CPU[0]
    fixed, run7, run8 = ((engine.seed_for("lesson01", public, cfg, seed), engine.seed_for("lesson01", hidden, cfg, seed))
                         for seed in (None, 7, 8))
    assert fixed[0] == run7[0] == run8[0]
    assert len({fixed[1], run7[1], run8[1]}) == 3
