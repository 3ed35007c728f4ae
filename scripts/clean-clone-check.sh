#!/usr/bin/env bash
# Clone the committed HEAD into an empty temporary folder — nothing beside it, so nothing
# outside the repository (no data beside the checkout, no .venv, no built index) can be
# leaned on — and run there the README's first command (scripts/demo.sh: set-up, index, search) and the
# tests that read the committed evaluation collections under evaldata/.
#
# What a new user gets from `git clone`: uncommitted changes are not checked. The clone
# makes its own .venv (a few minutes) and is removed afterwards; KEEP_CLONE=1 keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."

commit="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
    echo "clean-clone-check: uncommitted changes are not part of the check (HEAD only)"
fi

scratch="$(mktemp -d)"
if [[ "${KEEP_CLONE:-}" == 1 ]]; then
    trap 'echo "clean-clone-check: clone kept in $scratch/groove"' EXIT
else
    trap 'rm -rf "$scratch"' EXIT
fi
start=$SECONDS

git clone --quiet --no-hardlinks --no-checkout . "$scratch/groove"
cd "$scratch/groove"
git checkout --quiet --detach "$commit"
echo "clean-clone-check: $(git log -1 --format='%h %s') cloned into an empty folder"

bash scripts/demo.sh
# the demo's set-up is the light one: groove without torch
if .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "clean-clone-check: the demo's light install pulled in torch" >&2
    exit 1
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check pytest hypothesis
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/pytest -q \
    tests/test_eval_golden.py tests/test_chunking.py

echo "clean-clone-check: passed in $((SECONDS - start)) s"
