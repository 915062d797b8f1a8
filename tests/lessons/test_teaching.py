"""The lessons teach; they do not hand out the answers, and every exercise is a real step.

For every exercise, no non-trivial line of the reference body (the solved notebook's solution cell, between
`### BEGIN SOLUTION` and `### END SOLUTION`) may appear in the student notebook's teaching text: its markdown
cells and its demo cells. Lines are compared with their whitespace removed and their trailing comments cut.

A step is one solution cell. An exercise of one to three lines does not stand alone as a step: it shares its
cell with the exercise it belongs with (split_heads with merge_heads), each still graded under its own name
with its own check cell, or it is on STANDALONE_SHORT with the reason. The tests at the end check that a
shared step grades each of its exercises on its own, and that `course reset` of one restores the step.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import marks
from graders.registry import LESSONS

# Lines too generic to give anything away, whatever their length.
BOILERPLATE = {
    "super().__init__()",
    "withtorch.no_grad():",
    "model.eval()",
    "@torch.no_grad()",
    "@staticmethod",
}
MIN_CHARS = 12  # shorter lines (`return y`, `B, T = idx.shape`) say nothing an attentive reader lacks


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _code(line: str) -> str:
    """The line without its trailing comment (a `#` outside quotes ends the code)."""
    out, quote = [], None
    for ch in line:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out).strip()


def solution_lines(source: str) -> list[str]:
    """The lines between the solution markers of one cell (all its regions), stripped."""
    lines, inside = [], False
    for raw in source.splitlines():
        stripped = raw.strip()
        if stripped.startswith("### BEGIN SOLUTION"):
            inside = True
        elif stripped.startswith("### END SOLUTION"):
            inside = False
        elif inside:
            lines.append(stripped)
    return lines


def reference_lines(source: str) -> list[str]:
    """The non-trivial lines between the solution markers of one cell."""
    lines = []
    for stripped in solution_lines(source):
        code = _squash(_code(stripped))
        if len(code) >= MIN_CHARS and code not in BOILERPLATE and not re.fullmatch(r"return\w+", code):
            lines.append(code)
    return lines


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _is_text(cell) -> bool:
    role = cell.get("metadata", {}).get("course", {}).get("role")
    return cell["cell_type"] == "markdown" or role == "demo"


def leaks(lesson) -> list[str]:
    """'exercise: line (cell N)' for each reference line found in the student notebook's text."""
    texts = [(i, _squash("".join(c["source"]))) for i, c in enumerate(_cells(lesson.student_path)) if _is_text(c)]
    found = []
    for cell in _cells(lesson.solution_path):
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        if not nbg.get("solution") or cell["cell_type"] != "code":
            continue
        for line in reference_lines("".join(cell["source"])):
            found += [f"{nbg.get('grade_id')}: {line} (cell {i})" for i, text in texts if line in text]
    return found


CASES = [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS]


def test_the_comparison_catches_a_leak():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    shifted = x - x.amax(dim=-1, keepdim=True)  # why\n" \
          "    return shifted\n    ### END SOLUTION\n"
    lines = reference_lines(src)
    assert lines == ["shifted=x-x.amax(dim=-1,keepdim=True)"]
    assert lines[0] in _squash("Write `shifted = x - x.amax(dim=-1, keepdim=True)` first.")
    assert _code('s = "a # b"  # note') == 's = "a # b"'


# The answers a reviewer found in the text (issue 19), kept out for good: (lesson, a fragment of the text).
KNOWN_ANSWERS = [
    ("lesson01", "torch.exp(x - x.max()) / torch.exp(x - x.max()).sum()"),
    ("lesson02", "tril(diagonal=t_k - t_q)"),
    ("lesson02", "visible = mask.any(-1, keepdim=True)"),
    ("lesson03", "x.view(1, 3, 2, 2).transpose(1, 2)"),
    ("lesson03", "then reshape to `(B, T, H·Dh)`"),
    ("lesson05", "xf.pow(2).mean(-1, keepdim=True)"),
    ("lesson08", "self.lm_head.weight = self.wte.weight"),
    ("lesson08", "sum(p.numel() for p in model.parameters())"),
    ("lesson08", "torch.topk(z, k).values[:, -1:]"),
    ("lesson08", "cache.update(layer_idx, k, v)                      #"),
    ("lesson09", "this solution makes descriptors"),
    # issue 31
    ("lesson03", "qkv_proj(x).chunk(3, dim=-1)"),
    ("lesson03", "(`repeat_interleave`)"),
    ("lesson03", "def kv_cache_bytes("),
    ("lesson04", "(h - h.mean(-1, keepdim=True)) / h.std(-1, keepdim=True, unbiased=False)"),
    ("lesson04", "(flat - flat.mean()) / (flat.var(unbiased=False) + 1e-5).sqrt()"),
    ("lesson05", "x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)"),
    ("lesson08", "`model.parameters()` yields every `Parameter` once"),
    ("lesson08", "def kv_bytes_per_token("),
    ("lesson10", "down_proj(silu(gate_proj(x)) * up_proj(x))"),
    ("lesson10", "int(2 * 4 * d_model / 3)"),
    ("lesson10", "int(2·4·d_model/3)"),
    ("lesson10", "`cache.update(layer_idx,\n  k, v)`, `repeat_kv`"),    # issue 47
    ("lesson03", "sum(p.numel() for p in m.parameters())"),
    ("lesson07", "sum(p.numel() for p in m.parameters())"),
    ("lesson08", "x + attn(ln1(x)), then x + mlp(ln2(x))"),
    ("lesson09", "2·b·h·d·(t_k² − max(t_k − t_q, 0)²)"),
    ("lesson09", "2·32·32·128·4096·2"),
    ("lesson10", "x + attn(ln1(x)), then x + mlp(ln2(x))"),
    ("lesson10", "(6·N_mm + 12·n_layer·n_embd·block_size) · tokens"),
]


@pytest.mark.parametrize("lesson", CASES)
def test_no_reference_line_in_the_teaching_text(lesson):
    found = leaks(lesson)
    assert not found, "the lesson's text gives away its exercises' code:\n" + "\n".join(found)


def test_every_exercise_has_reference_lines_to_compare():
    """The comparison is not vacuous: every solution cell of lessons 01-09 yields lines to look for."""
    for lesson in LESSONS:
        if lesson.number > 9:
            continue
        for cell in _cells(lesson.solution_path):
            nbg = cell.get("metadata", {}).get("nbgrader", {})
            if nbg.get("solution") and cell["cell_type"] == "code":
                assert reference_lines("".join(cell["source"])), (lesson.id, nbg.get("grade_id"))


def test_triton_stub_has_a_skeleton_and_no_body():
    lesson = next(l for l in LESSONS if l.id == "lesson09")
    stub = next("".join(c["source"]) for c in _cells(lesson.student_path)
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "flash_attention_triton")
    kernel = stub.split("def flash_attention_triton(")[0]
    for skeleton in ("tl.program_id(0)", "tl.program_id(1)", "rows = first + tl.arange(0, BLOCK_M)", "for start in range("):
        assert skeleton in kernel, skeleton
    assert "tl.dot" not in kernel  # the body is the student's
    assert kernel.count("raise NotImplementedError()") == 1


@pytest.mark.parametrize("lesson_id, fragment", KNOWN_ANSWERS)
def test_known_answer_stays_out_of_the_text(lesson_id, fragment):
    lesson = next(l for l in LESSONS if l.id == lesson_id)
    texts = [_squash("".join(c["source"])) for c in _cells(lesson.student_path) if _is_text(c)]
    texts += [_squash("".join(c["source"])) for c in _cells(lesson.student_path)
              if c.get("metadata", {}).get("nbgrader", {}).get("solution")]  # the stub's own comments too
    assert not any(_squash(fragment) in t for t in texts), fragment


@pytest.mark.parametrize("lesson", CASES)
def test_lesson_ends_with_self_check_questions(lesson):
    """Three or four questions at the end, each answer hidden in a <details> block until asked for."""
    last = _cells(lesson.student_path)[-1]
    text = "".join(last["source"])
    assert last["cell_type"] == "markdown" and text.startswith("## Self-check"), lesson.id
    assert 3 <= text.count("<details>") == text.count("</details>") == text.count("<summary>") <= 4


def test_lesson08_trains_on_real_text_with_stored_figures():
    lesson = next(l for l in LESSONS if l.id == "lesson08")
    cells = _cells(lesson.solution_path)
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "from graders.corpus import" in code and "tiny_corpus" not in code
    pngs = [o for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pngs) >= 2  # the loss curves and the attention maps of the stored run


# ----------------------------------------------------------------------------------------------
# Steps: no 1-3-line exercise stands alone (issue 19)

MIN_STEP_LINES = 4  # non-comment lines between the solution markers of one cell
# Exercises that stay a short step of their own, and why.
STANDALONE_SHORT = {
    ("lesson01", "softmax"): "the course's first idea: the three lines are max-subtraction, exp and the normalisation, "
                             "each the point of section 3; folding it into attention would hide the stability step "
                             "that its own checks (±1e4, any dim, no torch.softmax) and 4 points are about",
}


def step_lines(source: str) -> int:
    """The non-blank, non-comment lines of a cell's solution regions (all of them)."""
    return sum(1 for line in solution_lines(source) if line and not line.startswith("#"))


def steps(lesson) -> list[tuple[dict, list[str]]]:
    """Each solved cell that defines exercises, with the exercises it defines (in registry order)."""
    from graders.engine.notebook import defines, defining_cell, graded_cells

    cells = graded_cells(_cells(lesson.solution_path))
    out: dict[int, tuple[dict, list[str]]] = {}
    for ex in lesson.exercises:
        cell = defining_cell(cells, ex.name)
        assert cell is not None and defines(cell["source"], ex.name), (lesson.id, ex.name)
        out.setdefault(cell["index"], (cell, []))[1].append(ex.name)
    return list(out.values())


SHARED = [pytest.param(l, names, marks=marks(l), id=f"{l.id}-{'+'.join(names)}")
          for l in LESSONS for _, names in steps(l) if len(names) > 1]


def test_step_lines_counts_code_not_comments():
    src = ("def f(x):\n    ### BEGIN SOLUTION\n    # a comment\n\n    y = x  # note\n    return y\n"
           "    ### END SOLUTION\n\ndef g():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    assert step_lines(src) == 3


@pytest.mark.parametrize("lesson", CASES)
def test_every_exercise_is_a_real_step(lesson):
    """Each exercise has at least MIN_STEP_LINES lines, or shares its cell with another exercise (and the
    shared step has them), or is on STANDALONE_SHORT."""
    short = []
    for cell, names in steps(lesson):
        n = step_lines(cell["source"])
        if n >= MIN_STEP_LINES:
            continue
        if len(names) > 1 or (lesson.id, names[0]) not in STANDALONE_SHORT:
            short.append(f"{' + '.join(names)}: {n} lines")
    assert not short, (f"{lesson.id}: steps under {MIN_STEP_LINES} lines (grow them, or fold each into the cell of "
                       "the exercise it belongs with):\n" + "\n".join(short))


def test_the_standalone_list_is_still_needed():
    for (lesson_id, name), why in STANDALONE_SHORT.items():
        lesson = next(l for l in LESSONS if l.id == lesson_id)
        ((cell, names),) = [(c, n) for c, n in steps(lesson) if name in n]
        assert names == [name] and step_lines(cell["source"]) < MIN_STEP_LINES, (lesson_id, name)
        assert len(why) > 40, (lesson_id, name)


def test_the_course_has_shared_steps():
    assert {tuple(p.values[1]) for p in SHARED} >= {("causal_mask", "to_additive"), ("split_heads", "merge_heads"),
                                                     ("GPT", "count_parameters"), ("attention_flops", "kv_cache_bytes")}


def _stub_all_but(lesson, source: str, keep: str) -> str:
    """The solved cell `source` with every exercise's solution regions but `keep`'s turned into stubs, as
    `course build` would leave them: a student who has written one exercise of a shared step."""
    import ast

    from graders.engine.notebook import defines

    tree = ast.parse(source)
    stubbed = set()
    for node in tree.body:
        name = getattr(node, "name", None)
        if name != keep and any(e.name == name for e in lesson.exercises):
            stubbed.update(range(node.lineno, node.end_lineno + 1))
    out, inside = [], False
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if number in stubbed and marker.startswith("### BEGIN SOLUTION"):
            inside = True
            out.append(line[:len(line) - len(line.lstrip())] + "raise NotImplementedError()")
        elif inside:
            inside = not marker.startswith("### END SOLUTION")
        else:
            out.append(line)
    result = "\n".join(out) + "\n"
    assert defines(result, keep) and result.count("raise NotImplementedError()") >= 1
    return result


def _alone(lesson, keep: str, names) -> bool:
    """Whether `keep` can pass with its step's other exercises left as stubs: it calls none of them (the
    registry's `depends`; RMSNorm's forward calls rms_norm, so it cannot)."""
    exercise = next(e for e in lesson.exercises if e.name == keep)
    return not (set(exercise.depends) & (set(names) - {keep}))


@pytest.mark.parametrize("lesson, names", SHARED)
def test_a_shared_step_grades_each_exercise_on_its_own(lesson, names, tmp_path):
    """One exercise of a shared step written, the others left as stubs: the written one passes with its full
    points (unless it calls a stubbed partner: then it fails with "fix <partner> first", never "not implemented",
    issue 28), each stub is not_implemented, and the cell itself runs."""
    from harness import check_in_process, explain, with_code

    (cell, _), = [(c, n) for c, n in steps(lesson) if n == names]
    for keep in names:
        path = with_code(lesson, keep, _stub_all_but(lesson, cell["source"], keep), tmp_path, f"{keep}.ipynb")
        result = check_in_process(lesson, path, names)
        assert not result.notes, result.notes
        for ex in result.exercises:
            if ex.id == keep:
                expected = "passed" if _alone(lesson, keep, names) else "failed"
            else:
                expected = "not_implemented"
            assert ex.status == expected, f"{keep} written:\n" + explain(ex)
            assert ex.points == (ex.max_points if expected == "passed" else 0)
            if expected == "failed":  # its own code is written: the stub it calls is what to fix
                assert "first" in ex.reason and any(f"`{n}`" in ex.reason for n in names if n != keep), ex.reason


def test_reset_of_one_exercise_restores_its_shared_step(tmp_path):
    import nbformat

    from course_cli.student.workspace_ops import reset

    lesson = next(l for l in LESSONS if l.id == "lesson03")
    notebook = tmp_path / lesson.notebook
    nb = nbformat.read(lesson.student_path, as_version=4)
    from harness import solution_cell_index

    i = solution_cell_index(nb, "merge_heads")
    pristine = nb.cells[i].source
    nb.cells[i].source = pristine.replace("raise NotImplementedError()", "return x", 1) + "\nprint('mine')\n"
    nbformat.write(nb, notebook)
    said = reset(lesson, notebook, tmp_path, "merge_heads")
    assert "`merge_heads` (and `split_heads`, which shares its cell)" in said, said
    assert nbformat.read(notebook, as_version=4).cells[i].source == pristine
    assert list((tmp_path / ".course" / "backups").glob("*.ipynb"))  # the student's version is kept
