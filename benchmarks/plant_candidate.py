"""The solved notebook of LESSON with candidate N of EXERCISE's mutants (graders/engine/mutations.py) in place of
its cell, written to FOLDER: `python benchmarks/plant_candidate.py LESSON EXERCISE N FOLDER` prints its path,
operator and sentence (for benchmarks/follow_up_cost.sh)."""
import sys, json
HERE = __import__("pathlib").Path(__file__).resolve().parent.parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]
from pathlib import Path
from harness import with_code
from graders.registry import find_lesson
from graders.engine.mistakes import solved_cell
from graders.engine import mutations
lesson = find_lesson(sys.argv[1]); ex = sys.argv[2]; n = int(sys.argv[3])
src = solved_cell(lesson.id, ex)
cands = mutations.mutants(src, ex, mutations.CAP)
m = cands[n]
out = Path(sys.argv[4]); out.mkdir(parents=True, exist_ok=True)
p = with_code(lesson, ex, m.source, out, name=f"{ex}-{n}.ipynb")
print(json.dumps({"path": str(p), "operator": m.operator, "sentence": m.sentence, "n": len(cands)}))
