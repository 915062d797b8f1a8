"""Text from a child or a submission, made safe where it is written: one function per sink.

Every string a grading child sends back (error messages, exception names, check messages) and every string a
submission brings (file and student names, metadata) is untrusted: it may hold a lone surrogate ("\\udcff",
which no UTF-8 writer accepts), terminal escape sequences ("\\x1b[2J" clears the screen, "\\x9b" is the C1
form of ESC [), markup ("<img src=x onerror=...>"), a spreadsheet formula ("=HYPERLINK(...)"), or megabytes.

  for_terminal  the terminal and log lines: C0 (but newline and tab), DEL, C1, ESC, the bidirectional
                controls (U+061C, U+200E/F, U+202A-202E, U+2066-2069) and U+2028/U+2029 escaped as
                \\xNN / \\uNNNN; lone surrogates escaped; bounded
  for_json      JSON, the journal: lone surrogates and non-characters escaped (the text stays readable and
                any writer, ensure_ascii or not, can write it); bounded. `json_clean` applies it to every
                string (and key) of a structure
  for_html      HTML (feedback, the report): escaped, controls removed; bounded
  for_markdown  Markdown rendered to HTML (nbgrader's grading notes): as for_html, Markdown's own markup too
  for_script_json  a JSON document inside an HTML <script> element (the report's data block): <, >, & and
                U+2028/U+2029 written as \\uXXXX escapes, so no string can end the element, open a comment
                (`<!--` makes the HTML parser look for `-->` and a later `</script>`) or break a JS string
  for_csv       a CSV cell: as for_terminal, newlines too, and a leading =, +, -, @, tab or CR neutralised with
                a quote (the spreadsheet shows the text, never runs it); bounded

Each takes `limit` (characters kept from the input; the rest is replaced by a note of how many were cut).
"""

from __future__ import annotations

import html
import re

LIMIT = 4000  # characters of one untrusted string kept by default

_SURROGATE = re.compile("[\ud800-\udfff]")
_NONCHAR = re.compile("[\ufdd0-\ufdef\ufffe\uffff]")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SEPARATORS = "\u2028\u2029"  # LINE and PARAGRAPH SEPARATOR: line breaks to str.splitlines and JavaScript
# C0 but \t and \n, DEL, C1 (with 0x9b, the one-byte CSI), the bidirectional controls, the two separators
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + _SEPARATORS + "]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + _SEPARATORS + "]")
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _escape(m: "re.Match") -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def bound(text, limit: int | None = LIMIT) -> str:
    """`text` as a string of at most `limit` characters (plus a note of how many were cut)."""
    s = text if isinstance(text, str) else str(text)
    if limit is not None and len(s) > limit:
        s = s[:limit] + f"… ({len(s) - limit} more characters)"
    return s


def for_json(text, limit: int | None = LIMIT) -> str:
    """For JSON and the journal: lone surrogates and non-characters escaped, so that every writer can write
    it (UTF-8 or ensure_ascii) and every reader reads it back the same."""
    s = bound(text, limit)
    s = _SURROGATE.sub(_escape, s)
    return _NONCHAR.sub(_escape, s)


def json_clean(obj, limit: int | None = LIMIT, _depth: int = 0):
    """`obj` with every string in it (dict keys too) passed through for_json; other values as they are."""
    if isinstance(obj, str):
        return for_json(obj, limit)
    if _depth > 64:
        return for_json(repr(obj)[:200], limit)
    if isinstance(obj, dict):
        return {(for_json(k, limit) if isinstance(k, str) else k): json_clean(v, limit, _depth + 1)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_clean(v, limit, _depth + 1) for v in obj]
    return obj


def for_terminal(text, limit: int | None = LIMIT, newlines: bool = True) -> str:
    """For the terminal and log lines: control characters (C0, DEL, C1, ESC, bidirectional controls) shown as
    escapes, never sent; newline and tab kept unless newlines=False."""
    s = for_json(text, limit)
    return (_CONTROL if newlines else _CONTROL_ALL).sub(_escape, s)


def for_html(text, limit: int | None = LIMIT) -> str:
    """For HTML: escaped, quotes included; control characters removed."""
    return html.escape(_CONTROL.sub("", for_json(text, limit)), quote=True)


def for_markdown(text, limit: int | None = LIMIT) -> str:
    """For Markdown that is rendered to HTML (a notebook's markdown cell): as for_html, and the characters
    Markdown would turn into markup, code or links escaped too; one line."""
    s = for_html(text, limit).replace("\n", " ")
    return s.replace("`", "&#96;").replace("[", "&#91;").replace("]", "&#93;").replace("*", "&#42;") \
        .replace("_", "&#95;").replace("\\", "&#92;")


_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def for_script_json(obj) -> str:
    """`obj` as JSON text to put inside a <script> element: json.dumps, then every <, >, &, U+2028 and U+2029
    written as a \\uXXXX escape (the same value to a JSON parser; nothing the HTML parser reacts to)."""
    import json

    text = json.dumps(json_clean(obj, None), ensure_ascii=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_UNSAFE[m.group()], text)


def for_csv(text, limit: int | None = LIMIT) -> str:
    """For one CSV cell: controls escaped (newlines too), a leading formula character neutralised."""
    s = for_terminal(text, limit, newlines=False)
    return "'" + s if s.startswith(_FORMULA) else s
