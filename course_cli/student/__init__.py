"""The student's side: the workspace, the progress store, and one "check then record" for check, watch and the notebook."""
