"""`course build`'s demo guard: a demo cell that uses an exercise runs under `with demo()`; its last value is
still shown, through the guard's own `shown(...)`, and the student's cell carries no display boilerplate."""

from __future__ import annotations

from course_cli.instructor.build import guard_demo


def _run(source: str, capsys, f):
    exec(compile(source, "<cell>", "exec"), {"f": f})
    return capsys.readouterr().out


def test_the_last_value_is_shown_and_a_stub_is_reported(capsys):
    src = guard_demo("x = f(2)\nx + 1", {"f"})
    assert "_shown" not in src and "display(" not in src and src.rstrip().endswith("shown(x + 1)")
    assert "3" in _run(src, capsys, lambda v: v)

    def stub(v):
        raise NotImplementedError()

    assert "not written yet" in _run(src, capsys, stub)


def test_prints_plots_and_assignments_are_left_alone():
    assert "shown(" not in guard_demo("print(f(1))", {"f"})
    assert "shown(" not in guard_demo("y = f(1)\nplt.show()", {"f"})
    assert "shown(" not in guard_demo("y = f(1)", {"f"})
    assert guard_demo("y = g(1)\ny", {"f"}) == "y = g(1)\ny"  # no exercise used: untouched


def test_a_multi_line_value_and_non_ascii_text_keep_their_shape(capsys):
    src = guard_demo('{"α·β": f(1),\n "b": 2}  # note', {"f"})
    assert src.splitlines()[-2].strip() == 'shown({"α·β": f(1),' and src.rstrip().endswith('"b": 2})  # note')
    assert "α·β" in _run(src, capsys, lambda v: v)


def test_the_guard_name_never_shadows_the_cells_own():
    src = guard_demo("shown = f(1)\nshown", {"f"})
    assert "as shown_:" in src and src.rstrip().endswith("shown_(shown)")
