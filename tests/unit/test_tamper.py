"""Student code that tries to turn a wrong answer into a pass, case by case. Each notebook has a wrong
softmax (it forgets to normalise) plus a cell that tampers; none may pass. The parent judges plain data
(JSON, and tensors read with torch.load(weights_only=True)) against the reference, computed elsewhere."""

from __future__ import annotations

import json

import nbformat
import pytest
import torch

from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import grade_notebook
from graders.engine import clean
from graders.registry import find_lesson
from harness import set_limit

L01 = find_lesson("lesson01")
WRONG = "def softmax(x, dim=-1):\n    return (x - x.amax(dim=dim, keepdim=True)).exp()  # not normalised\n"

SUBCLASS = '''
class Liar(torch.Tensor):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def detach(self): return self
    def allclose(self, *a, **k): return True
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True  # every torch call on it "succeeds" with True
'''

TAMPERS = {
    "patch_allclose_and_testing": "import torch, torch.testing\ntorch.allclose = lambda *a, **k: True\n"
                                  "torch.equal = lambda *a, **k: True\n"
                                  "torch.testing.assert_close = lambda *a, **k: None\n",
    "patch_builtins": "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
                      "builtins.abs = lambda x: 0\n",
    "replace_probe_exercise": "import graders.engine as e\n"
                              "e.probe_exercise = lambda module, ns, name, configs, only_public=False: "
                              "{'checks': {}, 'forbidden': [], 'mutated': []}\n",
    "replace_compare_close": "import graders.engine.compare as c\nc.close = lambda *a, **k: None\n",
    "clear_checks": "import graders.lesson01_sdpa as g\ng.CHECKS.clear()\n",
    "replace_judges_and_probes": "import graders.lesson01_sdpa as g\n"
                                 "for c in g.CHECKS:\n    c.judge = lambda s, r, ctx: None\n"
                                 "    c.probe = lambda ctx: {}\n",
    "rebind_checks": "import graders.lesson01_sdpa as g, graders.engine as e\n"
                     "g.CHECKS = e.Checks('lesson01')\ne.CHECKS_OF = lambda m: e.Checks('lesson01')\n",
    "tensor_subclass": SUBCLASS + "_wrong = softmax\n"
                       "def softmax(x, dim=-1):\n    return _wrong(x, dim).as_subclass(Liar)\n",
    "forged_print_and_exit": "import os, sys\n"
                             "print('{\"score\": 10.0, \"status\": \"passed\"}')\n"
                             "sys.stdout.flush()\nos._exit(0)\n",
    "forge_obs_files": "import glob, json, os, sys, torch\n"
                       "out = json.load(open(sys.argv[1]))['out']\n"
                       "for name in ('softmax', 'scaled_dot_product_attention'):\n"
                       "    torch.save({'checks': {}, 'forbidden': [], 'mutated': []}, os.path.join(out, f'obs-{name}.pt'))\n"
                       "open(os.path.join(out, 'progress'), 'w').write('done')\n"
                       "os._exit(0)\n",
}


def notebook(tmp_path, tamper: str, name: str):
    nb = nbformat.read(L01.solution_path, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.lstrip().startswith("def softmax"))
    nb.cells[i].source = WRONG
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(tamper))
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def short_limits(monkeypatch):
    set_limit(monkeypatch, "cell_timeout", 5.0)
    set_limit(monkeypatch, "exercise_timeout", 10.0)
    set_limit(monkeypatch, "notebook_timeout", 30.0)  # a child wrecked by patched builtins ends sooner
    monkeypatch.setattr(sandbox, "STARTUP_ALLOWANCE", 15.0)


def test_clean_strips_a_lying_subclass_without_calling_it():
    ns: dict = {"torch": torch}
    exec(SUBCLASS, ns)
    t = torch.arange(6.0).reshape(2, 3).as_subclass(ns["Liar"])
    c = clean({"output": t, "n": True, "items": (t, 1.5)})
    assert type(c["output"]) is torch.Tensor and torch.equal(c["output"], torch.arange(6.0).reshape(2, 3))
    assert type(c["items"][0]) is torch.Tensor


def test_numbers_and_strings_lose_their_subclasses():
    class Evil(float):
        def __eq__(self, other):
            return True

    class EvilStr(str):
        pass

    c = clean({"x": Evil(1.0), "s": EvilStr("hi")})
    assert type(c["x"]) is float and type(c["s"]) is str


POISON = '''
import glob, os, torch
from course_cli import settings
for path in glob.glob(os.path.join(str(settings.cache_dir()), "lesson01-cpu-*.pt")):
    data = torch.load(path, weights_only=True)
    mine = data["mistakes"]["no_scaling"]  # the observations of exactly my (wrong) answer
    for obs in mine["checks"].values():
        for key in [k for k in obs if k.startswith("torch ")]:
            obs[key] = obs[key[len("torch "):]]  # torch's own answer "agrees" with mine too
    data["exercises"]["scaled_dot_product_attention"] = mine
    torch.save(data, path)
'''


