#!/usr/bin/env bash
# Install the MCP Inspector CLI (a third-party MCP client) for tests/test_mcp_inspector.py.
#
# Pinned to 0.15.0: later releases need node 22 and this project's machines run node 20.
# It goes to .cache/inspector/ (kept out of git by a .gitignore the script writes there),
# never globally, and only its --cli mode is used: the web UI is never started.
# Idempotent: a second run with the right version present does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="0.15.0"
PREFIX=".cache/inspector"
PKG_JSON="$PREFIX/node_modules/@modelcontextprotocol/inspector/package.json"

installed_version() {
    [[ -f "$PKG_JSON" ]] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$(pwd)/$PKG_JSON"
}

if ! command -v npm >/dev/null 2>&1; then
    echo "install-inspector: npm is not installed (need node >= 20 with npm)" >&2
    exit 1
fi

mkdir -p "$PREFIX"
# A self-ignoring folder: nothing under .cache/ is ever committed.
[[ -f .cache/.gitignore ]] || printf '*\n' > .cache/.gitignore

if [[ "$(installed_version)" == "$VERSION" ]]; then
    echo "install-inspector: @modelcontextprotocol/inspector $VERSION already in $PREFIX"
    exit 0
fi

npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/inspector@$VERSION"

if [[ "$(installed_version)" != "$VERSION" ]]; then
    echo "install-inspector: installation finished but version $VERSION is not in $PREFIX" >&2
    exit 1
fi
echo "install-inspector: installed @modelcontextprotocol/inspector $VERSION in $PREFIX"
