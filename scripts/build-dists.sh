#!/usr/bin/env bash
# Usage: build-dists.sh [OUTDIR]     (default dist/)
#
# Build a wheel and an sdist of groove-core, of each plugin under plugins/ and of the
# example plugin under examples/ into OUTDIR, with `python -m build` (isolated build
# environments, the wheel built from the sdist), then `twine check --strict` them.
# groove-* wheels and sdists already in OUTDIR are replaced. The projects build side by
# side (each build mostly waits for its build environment); their output goes to
# OUTDIR/build-NAME.log, shown when a build fails. Needs .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[[ -x "$PY" ]] || { echo "build-dists: no $PY; run scripts/setup.sh first" >&2; exit 1; }

OUT="${1:-dist}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/groove_*.whl "$OUT"/groove_*.tar.gz "$OUT"/build-*.log

projects=()
pids=()
for project in . plugins/*/ examples/*/; do
    [[ -f "$project/pyproject.toml" ]] || continue
    if [[ "$project" == . ]]; then name=groove_core; else name="$(basename "$project")"; fi
    "$PY" -m build --outdir "$OUT" "$project" >"$OUT/build-$name.log" 2>&1 &
    projects+=("$name")
    pids+=("$!")
done

failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        log="$OUT/build-${projects[$i]}.log"
        echo "build-dists: building ${projects[$i]} failed; the end of $log:" >&2
        tail -n 40 "$log" >&2
        failed=1
    fi
done
((failed == 0)) || exit 1

if ! "$PY" -m twine check --strict "$OUT"/groove_*.whl "$OUT"/groove_*.tar.gz \
    >"$OUT/build-twine.log" 2>&1; then
    echo "build-dists: twine check failed:" >&2
    cat "$OUT/build-twine.log" >&2
    exit 1
fi
echo "build-dists: built and checked (twine check --strict) in $OUT:"
(cd "$OUT" && ls -1 groove_*.whl groove_*.tar.gz | sed 's/^/  /')
