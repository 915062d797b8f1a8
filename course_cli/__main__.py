from course_cli.main import cli

cli(prog_name="course")
