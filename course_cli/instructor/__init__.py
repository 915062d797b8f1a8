"""The instructor's outputs: nbgrader, Gradescope, Classroom, the report, the student distribution, the build."""
