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
  [ -f "$plugin/pyproject.toml" ] || continue
  if [ "$plugin" = "plugins/groove_reranker_bge/" ]; then
    packages+=(-e "${plugin}[flag,test]")   # its tests exercise both backends
  else
    packages+=(-e "$plugin")
  fi
done
# torch pinned in the same command as everything that needs it: a bare requirement
# would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet "${packages[@]}" torch==2.13.0
echo "groove installed: .venv/bin/groove"
