#!/usr/bin/env bash
# Set up (light: groove alone, no torch), index the project's own docs/ with the default
# embedder, and search them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --light
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/groove index docs
for query in "how do I exclude a word from a search" "検索から単語を除外する方法"; do
    printf '\n$ groove search "%s" --kb docs --limit 3\n' "$query"
    .venv/bin/groove search "$query" --kb docs --limit 3
done
