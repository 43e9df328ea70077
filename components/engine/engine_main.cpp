// The generated engine's entry point: the shared command line (engine/cli.h) instantiated with this engine's
// Model (model.h, generated), the extra commands and chat support its constraints ask for (engine_features.h,
// generated: `serve`, `chat`) and build facts (engine_config.h, generated; METAINFER_MANIFEST_SHA256 and
// METAINFER_VERSION, defined by the engine's build).
#include "common/output_check.h"
#include "engine/cli.h"
#include "engine_config.h"
#include "engine_features.h"
#include "model.h"

#ifndef METAINFER_MANIFEST_SHA256
#error "METAINFER_MANIFEST_SHA256 must be defined by the engine build (sha256 of MANIFEST.json)"
#endif
#ifndef METAINFER_VERSION
#error "METAINFER_VERSION must be defined by the engine build"
#endif

static_assert(mi::engine::EngineModel<engine::Model>, "model.h: engine::Model must satisfy mi::engine::EngineModel");

int main(int argc, char** argv) {
  namespace cfg = engine::config;
  // SIGPIPE ignored (a closed pipe is a write error, exit 1) and closed standard descriptors reserved; a weight file
  // truncated while mapped is a message naming it and exit 1 (io::kExitMappedFileChanged), not a SIGBUS death.
  mi::prepare_standard_streams();
  mi::io::install_mapped_file_sigbus_handler(cfg::kEngineName);
  mi::engine::EngineInfo info;
  info.engine_name = cfg::kEngineName;
  info.architecture = cfg::kArchitecture;
  info.family = cfg::kFamily;
  info.kernel_level = cfg::kKernelLevel;
  info.manifest_sha256 = METAINFER_MANIFEST_SHA256;
  info.metainfer_version = METAINFER_VERSION;
  info.threads = cfg::kThreads;
  info.max_batch = cfg::kMaxBatch;
  info.max_context = cfg::kMaxContext;
  info.kv_block_size = cfg::kKvBlockSize;
  info.kv_blocks = cfg::kKvBlocks;
  info.chunked_prefill = cfg::kChunkedPrefill;
  info.vocab_size = cfg::kVocabSize;
  info.fast_numerics_default = cfg::kFastNumericsDefault;
  info.bf16_kv_in_fast = cfg::kBf16KvInFast;
  info.weight_dtype = cfg::kWeightDtype;
  const int status = mi::engine::run_engine_cli<engine::Model, engine::ExtraCommands, engine::ChatCommands>(info, argc, argv);
  // run_engine_cli reported a failed stdout already when status != 0; this catches what only the final flush sees.
  return status != 0 ? status : mi::finish_standard_output(cfg::kEngineName, status);
}
