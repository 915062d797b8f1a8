"""Lesson 10's stored ablation (docs/data/lesson10_ablation.json) is the one benchmarks/lesson10_ablation.py
describes: the same ladder, every rung one change from the one before, matched in matrix weights (so in training
FLOPs), with the seeds and the learning-rate sweep the notebook's text reads from it."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict, fields

from graders.registry import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("lesson10_ablation", ROOT / "benchmarks" / "lesson10_ablation.py")
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules["lesson10_ablation"] = module
    spec.loader.exec_module(module)
    return module


def test_the_stored_run_is_the_scripts_ladder_matched_in_flops():
    ab = _script()
    stored = json.loads((ROOT / "docs" / "data" / "lesson10_ablation.json").read_text())
    size = ab.Size(**stored["size"])
    assert [r["label"] for r in stored["rows"]] == [label for label, _ in ab.LADDER]
    for (label, arch), row in zip(ab.LADDER, stored["rows"]):
        assert row["arch"] == asdict(arch), label
        assert {k: row[k] for k in ("params", "n_mm", "flops_per_token")} == ab.Model(size, arch).counts(), label
        assert len(row["val_loss"]) == len(stored["seeds"]) == 3, label
    base = stored["rows"][0]["n_mm"]
    assert all(abs(r["n_mm"] / base - 1) < 0.01 for r in stored["rows"])  # matched within 1 %
    for (_, a), (_, b) in zip(ab.LADDER, ab.LADDER[1:]):  # one change per rung
        assert sum(getattr(a, f.name) != getattr(b, f.name) for f in fields(a)) == 1
    assert set(stored["lr_sweep"]) == {ab.LADDER[0][0], ab.LADDER[-1][0]}
    assert all(len(v) == 3 for runs in stored["lr_sweep"].values() for v in runs.values())
