"""nbgrader's command line for the end-to-end tests: what the `nbgrader` script runs
(`nbgrader.apps.nbgraderapp.main`, the same application, options and config), in a fresh interpreter of this
venv that first declines jsonschema's optional IRI checker (`rfc3987_syntax`).

nbgrader imports jsonschema (through nbformat and Jupyter's server), and jsonschema loads that checker whenever
Jupyter's dependencies installed it: its grammar is built at import, 2.1 of the 3.4 s that `import nbgrader.apps`
takes here, for a format neither nbgrader's nor the course's schemas use (docs/benchmarks.md). Eleven test files
of the slow tier run nbgrader (17 commands in the exchange test alone). `course check` declines it the same way
(course_cli/sandboxed/notebook.py `_nbformat`). The instructor guide's test runs the guide's own `nbgrader`
commands, the installed script."""

from __future__ import annotations

import sys
from pathlib import Path

BIN = Path(sys.executable).parent
_MAIN = ("import sys; sys.modules.setdefault('rfc3987_syntax', None); sys.argv[0] = 'nbgrader'; "
         "from nbgrader.apps.nbgraderapp import main; sys.exit(main())")


def nbgrader_argv(*args: str, python: str | Path = sys.executable) -> list[str]:
    """The argv of one nbgrader command (`nbgrader_argv("autograde", "lesson01", "--force")`), run by `python`
    (another interpreter that imports this venv's nbgrader: a student's, in the exchange tests)."""
    return [str(python), "-c", _MAIN, *args]
