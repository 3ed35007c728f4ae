#!/usr/bin/env bash
# Set up, index the project's own docs/ with the default embedder, and search them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/groove index docs
.venv/bin/groove search "how do I exclude a word from a search" --kb docs --limit 3
.venv/bin/groove search "検索から単語を除外する方法" --kb docs --limit 3
