#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds if needed (./setup.sh --build-only), then CTest.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --build-only
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
