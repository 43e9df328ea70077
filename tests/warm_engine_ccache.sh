#!/usr/bin/env bash
# CTest fixture setup (engine_ccache): generates the tiny golden engine the agent tests build again and again inside
# their sandboxes, and builds it here, every target, through the gates' own build (verify --only L1_stage).
# Why: a sandboxed build reads the host's ccache but may not write it (toolkit/agents/engine_gate.cpp), so on a clean
# CI checkout the agent tests, which CTest starts first as the longest, compiled every engine from scratch (about 42
# minutes for the suite on 2 cores instead of about 15 with the objects cached). This build, outside any sandbox,
# fills the cache once; the sandboxed builds of the same sources then hit it. It judges nothing: a failure here only
# means the agent tests build from scratch (and fail there on their own terms if the engine is broken).
# Usage: warm_engine_ccache.sh METAINFER MODEL_DIR OUT_DIR
set -euo pipefail
metainfer=$1 model=$2 out=$3
command -v ccache >/dev/null 2>&1 || { echo "no ccache: nothing to warm"; exit 0; }
rm -rf "$out"
"$metainfer" generate --model "$model" --platform x86-64-avx2 -o "$out" --no-verify
"$metainfer" verify "$out" --only L1_stage
rm -rf "$out"
