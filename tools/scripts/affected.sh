#!/usr/bin/env bash
# Daily use: lint, typecheck and test only the projects affected since origin/main (or the base given).
set -euo pipefail
cd "$(dirname "$0")/../.."
export NX_DAEMON="${NX_DAEMON:-false}" NX_NO_CLOUD=true NX_TUI=false
base="${1:-origin/main}"
git rev-parse --verify -q "$base" >/dev/null || base="$(git rev-list --max-parents=0 HEAD | tail -1)"
npx nx affected -t lint typecheck test --base="$base" --outputStyle=stream
