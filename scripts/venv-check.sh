#!/usr/bin/env bash
# Usage: venv-check.sh PYTHON VENV
#
# Exit 0 when the virtual environment VENV still works for PYTHON; otherwise print one line
# saying why and exit 1. setup.sh rebuilds a venv this rejects. A venv breaks without
# anyone touching it: the folder is moved or copied (its scripts' #! lines still name the
# old place), or the Python it was made from is upgraded or removed (bin/python dangles or
# is another version). Kept apart from setup.sh so it can be tested without an install.
set -euo pipefail

PYTHON="$1"
VENV="$2"

fail() {
    echo "$*"
    exit 1
}

[[ -d "$VENV" ]] || fail "$VENV does not exist"
[[ -x "$VENV/bin/python" ]] || fail "$VENV/bin/python is missing"

probe='import sys; print("%d.%d" % sys.version_info[:2]); print(sys.prefix)'
if ! info="$("$VENV/bin/python" -c "$probe" 2>/dev/null)"; then
    fail "$VENV/bin/python does not run"
fi
have_version="$(sed -n 1p <<<"$info")"
have_prefix="$(sed -n 2p <<<"$info")"

want_version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[[ "$have_version" == "$want_version" ]] ||
    fail "$VENV runs Python $have_version, $PYTHON is $want_version"

here="$(cd "$VENV" && pwd -P)"
[[ "$(cd "$have_prefix" 2>/dev/null && pwd -P)" == "$here" ]] ||
    fail "$VENV/bin/python belongs to $have_prefix"

# pip writes each console script with the venv's absolute interpreter path: a moved or
# copied venv keeps the old one.
for script in "$VENV/bin/pip" "$VENV/bin/groove"; do
    [[ -f "$script" ]] || continue
    shebang="$(head -n 1 "$script")"
    if [[ "$shebang" == "#!/bin/sh" ]]; then
        # A path too long for #! (or with a space) goes on line 2:
        # '''exec' /path/bin/python "$0" "$@"   (the path in double quotes if it has a space)
        line="$(sed -n 2p "$script")"
        line="${line#\'\'\'exec\' }"
        if [[ "$line" == \"* ]]; then
            line="${line#\"}"
            interpreter="${line%%\"*}"
        else
            interpreter="${line%% *}"
        fi
    else
        interpreter="${shebang#\#!}"
        interpreter="${interpreter%% *}"
    fi
    [[ "$(cd "$(dirname "$interpreter")" 2>/dev/null && pwd -P)" == "$here/bin" ]] ||
        fail "$script starts $interpreter, not this venv's python (the folder was moved)"
done
