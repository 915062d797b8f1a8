"""The security boundary: one notebook graded in the sandbox (the child, its limits, reading back what it wrote)."""
