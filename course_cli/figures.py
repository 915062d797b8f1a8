"""Figures for failing checks: the student's matrix, the reference's and their difference, side by side.

Drawn from the figure data the parent's judge leaves on a failing check (graders/engine/diagnosis.py `figure_data`:
plain lists, no tensors), as inline SVG: self-contained, scales to the width of a notebook's output area or a
page, and needs no plotting library. Masked cells that leaked (the reference has nothing there, the student
something) are outlined; the first bad index is marked.
"""

from __future__ import annotations

import html
import math

GAP = 26
TITLE = 22


def _diverging(v: float, vmax: float) -> str:
    """Blue for negative, white for 0, red for positive (NaN grey, Inf black)."""
    if math.isnan(v):
        return "#9e9e9e"
    if math.isinf(v):
        return "#000000"
    t = max(-1.0, min(1.0, v / vmax)) if vmax > 0 else 0.0
    if t >= 0:
        r, g, b = 255, int(255 - 180 * t), int(255 - 200 * t)
    else:
        r, g, b = int(255 + 200 * t), int(255 + 130 * t), 255
    return f"#{r:02x}{g:02x}{b:02x}"


def _sequential(v: float, vmax: float) -> str:
    """White to dark red: the size of an error."""
    if math.isnan(v) or math.isinf(v):
        return "#000000"
    t = max(0.0, min(1.0, v / vmax)) if vmax > 0 else 0.0
    return f"#{255:02x}{int(255 - 215 * t):02x}{int(255 - 215 * t):02x}"


def _finite(rows) -> list[float]:
    return [abs(x) for row in rows for x in row if isinstance(x, (int, float)) and math.isfinite(x)]


def matrix_svg(data: dict) -> str:
    """One figure: student | reference | difference, one SVG."""
    s, r = data["student"], data["reference"]
    n_rows, n_cols = len(s), len(s[0]) if s else 0
    boolean = data.get("kind") == "bool"
    diff = [[(float(a) - float(b)) if not boolean else float(a != b) for a, b in zip(ra, rb)] for ra, rb in zip(s, r)]
    vmax = max(_finite(s) + _finite(r) + [1e-12])
    dmax = max(_finite(diff) + [1e-12])
    CELL = max(12, min(32, 220 // max(n_rows, n_cols, 1)))  # px per cell (the SVG scales down to fit)
    w, h = n_cols * CELL, n_rows * CELL
    width, height = 3 * w + 2 * GAP + 8, h + TITLE + 6
    where = ", ".join(str(i) for i in data.get("index", []))
    label = f"{data.get('what', 'output')}" + (f"[{where}, :, :]" if where else "")
    fi, fj = data.get("first", [None, None])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="course-figure" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" font-family="sans-serif" font-size="11">',
           f"<title>{html.escape(label)}: yours, the reference's, and the difference</title>"]
    panels = (("yours", s, False), ("reference", r, False), ("|difference|" if not boolean else "differs", diff, True))
    for p, (name, rows, is_diff) in enumerate(panels):
        x0, y0 = 4 + p * (w + GAP), TITLE
        out.append(f'<text x="{x0}" y="{TITLE - 7}" font-weight="bold" font-size="12">{html.escape(name)}</text>')
        blocked = data.get("blocked") or []
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if boolean and not is_diff:
                    fill = "#263238" if v else "#ffffff"
                elif is_diff:
                    fill = _sequential(abs(float(v)), dmax)
                else:
                    fill = _diverging(float(v), vmax)
                out.append(f'<rect x="{x0 + j * CELL}" y="{y0 + i * CELL}" width="{CELL}" height="{CELL}" '
                           f'fill="{fill}" stroke="#e0e0e0" stroke-width="0.5"/>')
                if not boolean and i < len(blocked) and j < len(blocked[i]) and blocked[i][j]:  # masked: crossed
                    out.append(f'<path d="M{x0 + j * CELL + 2},{y0 + (i + 1) * CELL - 2}l{CELL - 4},{4 - CELL}" '
                               f'stroke="#b0bec5" stroke-width="1"/>')
        for i, row in enumerate(data.get("leaked") or []):  # masked cells that got something: outlined
            for j, v in enumerate(row):
                if v:
                    out.append(f'<rect class="leaked" x="{x0 + j * CELL + 1}" y="{y0 + i * CELL + 1}" '
                               f'width="{CELL - 2}" height="{CELL - 2}" fill="none" stroke="#ff6f00" '
                               f'stroke-width="2"/>')
        if fi is not None and p != 1:
            out.append(f'<rect class="first-bad" x="{x0 + fj * CELL - 1}" y="{y0 + fi * CELL - 1}" '
                       f'width="{CELL + 2}" height="{CELL + 2}" fill="none" stroke="#000" stroke-width="2.5"/>')
    out.append("</svg>")
    return "".join(out)


def caption(data: dict) -> str:
    where = ", ".join(str(i) for i in data.get("index", []))
    label = f"{data.get('what', 'output')}" + (f"[{where}, :, :]" if where else "")
    fi, fj = data.get("first", [None, None])
    if data.get("kind") == "bool":
        text = (f"{label}: yours and the reference's, dark True and white False; the third panel is red where "
                f"they differ")
    else:
        text = (f"{label}: yours and the reference's, blue negative, red positive, grey NaN, black ±Inf; the "
                f"third panel is |yours − reference|, white for 0 to dark red for the largest, black where either "
                f"is NaN or Inf")
    if fi is not None:
        text += f"; the first bad cell, ({fi}, {fj}) of the last two axes, is framed in black"
    if any(any(row) for row in (data.get("blocked") or [])) and data.get("kind") != "bool":
        text += "; masked cells are crossed"
    if any(any(row) for row in (data.get("leaked") or [])):
        text += "; masked cells that got a value are outlined in orange"
    return html.escape(text) + "."


def exercise_figures(ex, told: list | None = None) -> list[str]:
    """The SVG figures of an exercise's failing checks (at most one). `told`: the failing checks in the order the
    report tells them (render.failing_checks); the figure is of the first of them that has one, so it pictures
    the check the report leads with when that check has a figure. When it is of a later check, its caption
    says which: a picture under the lead is read as a picture of the lead."""
    if ex.status == "passed":
        return []
    rows = told if told is not None else [c for c in ex.checks if c.status != "passed"]
    for c in rows:
        data = getattr(c, "figure", None)
        if data and c.status != "passed":
            try:
                text = caption(data)
                if told and c is not told[0]:
                    text = f"This picture is of another failing check, {html.escape(c.name)}: " + text
                return [matrix_svg(data) + f'<div class="dim caption">{text}</div>']
            except Exception:  # a figure is a convenience
                return []
    return []
