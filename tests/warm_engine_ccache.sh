#!/usr/bin/env bash
# CTest fixture setup (engine_ccache): generates the tiny golden engine the agent tests build again and again inside
# their sandboxes, and builds it here, every target, through the gates' own build (verify --only L1_stage).
# Why: a sandboxed build reads the host's ccache but may not write it (toolkit/agents/engine_gate.cpp), so on a clean
# CI checkout the agent tests, which CTest starts first as the longest, compiled every engine from scratch. This
# build, outside any sandbox, fills the cache once; the sandboxed builds of the same sources then hit it. Measured on
# 2 cores (ctest -j2, empty cache): the suite 2521 s before, 1166 s with this fixture (666 s with a warm cache).
# ccache keys an object by the preprocessed source, the flags and the locale variables, so the build runs in the
# environment a sandboxed gate build gets (toolkit/agents/isolated_command.cpp: PATH, LANG=C.UTF-8, nothing else)
# plus the cache directory the gate hands it (ccache -k cache_dir, as engine_gate.cpp asks).
# Best effort: it judges nothing. CTest does not run the tests that require a failed fixture, so a failure here is
# reported and the script still exits 0; the agent tests then build from scratch and judge the engine themselves.
# Usage: warm_engine_ccache.sh METAINFER MODEL_DIR OUT_DIR
set -uo pipefail
metainfer=$1 model=$2 out=$3
cache_dir=$(ccache -k cache_dir 2>/dev/null) || { echo "no ccache (or one without -k): nothing to warm"; exit 0; }
rm -rf "$out"
mkdir -p "$out.home"
clean_env=(env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME="$out.home" CCACHE_DIR="$cache_dir")
if "${clean_env[@]}" "$metainfer" generate --model "$model" --platform x86-64-avx2 -o "$out" --no-verify &&
   "${clean_env[@]}" "$metainfer" verify "$out" --only L1_stage; then
  echo "ccache warmed with the agent tests' engine ($cache_dir)"
else
  echo "warning: warming ccache failed (see above); the agent tests will build their engines from scratch"
fi
rm -rf "$out" "$out.home"
exit 0
