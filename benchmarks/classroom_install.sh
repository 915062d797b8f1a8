#!/usr/bin/env bash
# The Classroom workflow's install command (course_cli/instructor/classroom.py install_command), timed twice in a
# fresh venv each time: the first run fills pip's cache, the second reads it (what setup-python's `cache: pip`
# gives a runner after the first push). Installs this checkout in place of the student distribution.
#
#   bash benchmarks/classroom_install.sh [python3.11]
set -euo pipefail
PY="${1:-python3.11}"
WORK="$(mktemp -d)"
export PIP_CACHE_DIR="$WORK/cache" PIP_DISABLE_PIP_VERSION_CHECK=1
cd "$(dirname "$0")/.."
for run in first warm; do
  "$PY" -m venv "$WORK/venv-$run"
  start=$(date +%s.%N)
  "$WORK/venv-$run/bin/python" -m pip install -q -c constraints.txt \
      --extra-index-url https://download.pytorch.org/whl/cpu . > "$WORK/$run.log" 2>&1
  echo "$run: $(echo "$(date +%s.%N) - $start" | bc) s"
done
echo "pip cache: $(du -sh "$WORK/cache" | cut -f1)"
rm -rf "$WORK"
