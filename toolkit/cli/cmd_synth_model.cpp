// `metainfer synth-model --family qwen3|llama --preset P --dtype bf16|f32 --seed N -o DIR`
#include <iostream>

#include "ckb/ckb.h"
#include "cli/commands.h"
#include "synth/synth_model.h"

namespace mi::cli {

void register_synth_model_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("synth-model", "Write a random-initialised checkpoint in real Hugging Face layout");
  struct Options {
    synth::SynthOptions synth;
    std::string out;
    std::string ckb_dir = ckb::default_ckb_dir().string();
    bool no_tokenizer = false;
  };
  auto opts = std::make_shared<Options>();
  opts->synth.tokenizer_cache = ckb::default_repo_root() / ".cache" / "tokenizers";
  cmd->add_option("--family", opts->synth.family, "model family (qwen3 | llama)")->capture_default_str();
  cmd->add_option("--preset", opts->synth.preset, "size preset (qwen3: tiny, 0.6b, 1.7b, 8b; llama: tiny, 1b, 3b, 8b)")->capture_default_str();
  cmd->add_option("--dtype", opts->synth.dtype, "bf16 | f32")->capture_default_str();
  cmd->add_option("--seed", opts->synth.seed, "random seed")->capture_default_str();
  cmd->add_option("-o,--out", opts->out, "output directory (must be new or empty)")->required();
  cmd->add_option("--threads", opts->synth.threads, "generator threads (0 = all)");
  cmd->add_flag("--no-tokenizer", opts->no_tokenizer, "write no tokenizer files (token-id-only checkpoint)");
  cmd->add_flag("--force", opts->synth.force, "write into a non-empty directory");
  cmd->add_option("--ckb", opts->ckb_dir, "CKB directory");
  cmd->callback([opts, &exit_code] {
    opts->synth.out = opts->out;
    opts->synth.with_tokenizer = !opts->no_tokenizer;
    const ckb::Ckb ckb = ckb::load(opts->ckb_dir);
    const synth::SynthResult r = synth::synth_model(ckb, opts->synth);
    std::cout << "wrote " << opts->out << ": " << opts->synth.family << " " << opts->synth.preset << ", "
              << r.parameters << " parameters, " << r.bytes / (1024.0 * 1024.0) << " MiB " << opts->synth.dtype
              << " in " << r.shards << " file(s)" << (r.tokenizer ? ", with tokenizer" : ", no tokenizer") << "\n";
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
