#!/usr/bin/env bash
# Create .venv/ at the project root and install groove (core, plugins, the example
# third-party plugin, dev tools) into it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
packages=(-e ".[dev]")
for plugin in plugins/*/ examples/*/; do
  [ -f "$plugin/pyproject.toml" ] && packages+=(-e "$plugin")
done
.venv/bin/python -m pip install --quiet "${packages[@]}"
echo "groove installed: .venv/bin/groove"
