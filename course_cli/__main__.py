"""`python -m course_cli`: the same command line as `course`."""
from course_cli.main import cli

cli(prog_name="course")
