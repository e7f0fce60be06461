#!/usr/bin/env bash
# Builds Portal and runs `portal server` with its embedded defaults. Extra
# arguments go to `portal server` (e.g. --data-dir /tmp/portal).
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/deps.sh
./hack/build.sh
exec ./bin/portal server "$@"
