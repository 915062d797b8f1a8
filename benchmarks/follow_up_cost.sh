#!/bin/bash
# the follow-up's one-time cost and the check after it: lesson, exercise, candidate
set -u
# usage: benchmarks/follow_up_cost.sh lesson10 Llama 39   (docs/benchmarks.md, "The follow-up on a failing check")
W=${SCRATCH:-$(mktemp -d)}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PATH=$PWD/.venv/bin:$PATH COURSE_WARM=0
L=$1; E=$2; N=$3
nb=$(python benchmarks/plant_candidate.py $L $E $N $W/nb | python3 -c "import json,sys; print(json.load(sys.stdin)['path'])")
base=$W/c-$L-base; rm -rf $base $W/c-$L-*
COURSE_CACHE_DIR=$base COURSE_FOLLOW_UPS=0 python -m course_cli check $L --solution >/dev/null 2>&1   # the reference, default budget
echo "$L $E candidate $N: budget counts:"; python3 -c "
import torch,glob
f=[x for x in glob.glob('$base/$L-cpu-*.pt') if 'mistakes' not in x][0]
c=torch.load(f,weights_only=True)['mutation']['$E']; print('  ', c)"
t() { local s=$(date +%s.%N); "$@" > $W/out.json 2>/dev/null; local e=$(date +%s.%N); python3 -c "
import json; r=json.load(open('$W/out.json')); x=[e for e in r['exercises'] if e['id']=='$E'][0]
print(f'{$e-$s:6.1f} s', x['status'], x.get('diagnosis_id'))"; }
for i in 1 2 3; do
  for mode in off on; do
    d=$W/c-$L-$mode-$i; mkdir -p $d; cp $base/$L-cpu-* $d/
    if [ $mode = off ]; then echo -n "  no follow-up:       "; COURSE_CACHE_DIR=$d COURSE_FOLLOW_UPS=0 t python -m course_cli check $L --notebook $nb --json
    else echo -n "  first (follows up): "; COURSE_CACHE_DIR=$d t python -m course_cli check $L --notebook $nb --json
         echo -n "  the check after:    "; COURSE_CACHE_DIR=$d t python -m course_cli check $L --notebook $nb --json; fi
  done
done
