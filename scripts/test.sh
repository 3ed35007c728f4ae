#!/usr/bin/env bash
# Set up, then run every check: lint, types, and the tests of the core and all plugins.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-inspector.sh   # a third-party MCP client the tests drive
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/pytest -q "$@"
