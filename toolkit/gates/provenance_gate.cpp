// L0 provenance (ckb/test_contracts/gates.toml).
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "constraints/constraints.h"
#include "coverage/coverage.h"
#include "gates/gates.h"
#include "gates/sandbox.h"
#include "generator/manifest.h"
#include "process/subprocess.h"

namespace mi::gates {
namespace fs = std::filesystem;

const std::vector<std::string>& foreign_framework_deny_list() {
  static const std::vector<std::string> deny = {"libtorch", "libc10", "libggml", "libllama", "libvllm",
                                                "libonnxruntime", "libtensorflow", "libopenvino", "libmkl",
                                                "libdnnl", "libctranslate2", "libpython"};
  return deny;
}

// ELF64 little-endian (System V gABI): section headers -> SHT_DYNAMIC -> DT_NEEDED offsets into its string table.
std::vector<std::string> elf_needed_libraries(const fs::path& file) {
  const std::string bytes = generator::read_file(file);
  auto u16 = [&](std::size_t off) -> uint64_t {
    if (off + 2 > bytes.size()) fail(file.string(), ": truncated ELF");
    return uint8_t(bytes[off]) | (uint64_t(uint8_t(bytes[off + 1])) << 8);
  };
  auto u32 = [&](std::size_t off) -> uint64_t { return u16(off) | (u16(off + 2) << 16); };
  auto u64 = [&](std::size_t off) -> uint64_t { return u32(off) | (u32(off + 4) << 32); };
  if (bytes.size() < 64 || bytes.compare(0, 4, "\x7f" "ELF") != 0) fail(file.string(), ": not an ELF file");
  if (bytes[4] != 2 || bytes[5] != 1) fail(file.string(), ": not a little-endian ELF64 file");
  const uint64_t shoff = u64(0x28), shentsize = u16(0x3a), shnum = u16(0x3c);
  std::vector<std::string> needed;
  for (uint64_t i = 0; i < shnum; ++i) {
    const std::size_t sh = std::size_t(shoff + i * shentsize);
    if (u32(sh + 4) != 6) continue;  // SHT_DYNAMIC
    const uint64_t offset = u64(sh + 0x18), size = u64(sh + 0x20), link = u32(sh + 0x28), entsize = u64(sh + 0x38);
    const std::size_t strtab_sh = std::size_t(shoff + link * shentsize);
    const uint64_t strtab = u64(strtab_sh + 0x18), strsize = u64(strtab_sh + 0x20);
    for (uint64_t e = 0; entsize && e + entsize <= size; e += entsize) {
      const uint64_t tag = u64(std::size_t(offset + e)), val = u64(std::size_t(offset + e + 8));
      if (tag == 0) break;
      if (tag != 1 || val >= strsize) continue;  // DT_NEEDED
      const std::size_t begin = std::size_t(strtab + val);
      const std::size_t end = bytes.find('\0', begin);
      if (end == std::string::npos) fail(file.string(), ": corrupt ELF string table");
      needed.push_back(bytes.substr(begin, end - begin));
    }
  }
  return needed;
}

namespace {

// What the generator emits now for the manifest's constraints (platform as resolved then), CKB and components:
// engine-relative path -> content. An edited source passes the manifest's own hashes when the manifest was rewritten
// too; it cannot pass this.
std::map<std::string, std::string> regenerate(const generator::Engine& engine) {
  const nlohmann::json& m = engine.manifest;
  const nlohmann::json& c = m.at("constraints");
  constraints::Overrides o;
  o.model = c.at("model").get<std::string>();
  o.platform = c.at("platform").get<std::string>();  // as the user gave it ("auto" resolves the same on this host)
  o.dtype = c.at("dtype").get<std::string>();
  o.mode = c.at("mode").get<std::string>();
  o.numerics = c.at("numerics").get<std::string>();
  o.kv_dtype = c.value("kv_dtype", "f32");  // absent in engines generated before runtime.kv_dtype
  o.prefix_cache = c.at("prefix_cache").get<bool>() ? "on" : "off";
  o.chat = c.at("chat").get<bool>() ? "on" : "off";
  o.threads = c.at("threads").get<int>();
  o.tensor_parallel = c.at("tensor_parallel").get<int>();
  o.max_batch = c.at("max_batch").get<int>();
  o.max_context = c.at("max_context").get<int>();
  o.tuning = c.value("tuning", std::map<std::string, int>{});
  o.kv_block_size = c.at("kv_block_size").get<int>();
  o.kv_blocks = c.value("kv_blocks", 0);
  o.chunked_prefill = c.at("chunked_prefill").get<int>();
  const nlohmann::json& t = c.at("targets");
  o.ttft_ms = t.at("ttft_ms").get<double>();
  o.tpot_ms = t.at("tpot_ms").get<double>();
  o.throughput_tok_s = t.at("throughput_tok_s").get<double>();
  o.memory_mb = t.at("memory_mb").get<double>();
  const ckb::Ckb ckb = ckb::load(ckb::default_ckb_dir());
  coverage::Plan plan = coverage::plan_for(ckb, "", o);
  plan.constraints.source = c.value("source", "");
  generator::GenerateOptions go;
  go.out = engine.dir;
  if (m.contains("fault") && m.at("fault").is_string()) go.fault = m.at("fault").get<std::string>();
  if (m.contains("fault_trace") && m.at("fault_trace").is_string()) go.fault_trace = m.at("fault_trace").get<std::string>();
  std::map<std::string, std::string> files;
  for (auto& f : generator::emit_engine(ckb, plan, go)) files[f.entry.path] = std::move(f.content);
  return files;
}

}  // namespace

// L0 sources, before anything of DIR is built or run: a build runs DIR's CMakeLists.txt, so it must be the generated
// one (a modified build could compile other sources and put the generated files back afterwards).
GateResult sources_gate(const generator::Engine& engine) {
  GateResult g{"L0_sources", "L0", "basic_execution", false, "", {}, 0, nlohmann::json::object()};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> problems;

  // 1. A fault-injected engine (tests only) is never accepted: its manifest would make the regeneration below
  //    reproduce the planted defect.
  for (const char* key : {"fault", "fault_trace"})
    if (engine.manifest.contains(key) && !engine.manifest.at(key).is_null())
      problems.push_back(std::string("MANIFEST.json names a test-only fault injection ('") + key + "': " +
                         engine.manifest.at(key).dump() + "): such an engine is never accepted");

  // 2. Every file is in the manifest with a matching hash; none is unlisted.
  std::map<std::string, std::string> listed;
  for (const auto& f : engine.manifest.at("files")) listed[f.at("path")] = f.at("sha256");
  int checked = 0;
  for (const auto& rel : generator::engine_source_files(engine.dir)) {
    auto it = listed.find(rel);
    if (it == listed.end()) {
      problems.push_back("file " + rel + " is not in MANIFEST.json");
      continue;
    }
    const std::string actual = generator::sha256_file(engine.dir / rel);
    if (actual != it->second) problems.push_back("file " + rel + " was modified (sha256 " + actual + ", manifest " + it->second + ")");
    listed.erase(it);
    ++checked;
  }
  for (const auto& [rel, sha] : listed) problems.push_back("file " + rel + " is in MANIFEST.json but missing");
  g.evidence["files_checked"] = checked;

  // 3. Every file is what the generator emits for this engine's constraints now (an edited source with a rewritten
  //    manifest passes 2, not this).
  try {
    const std::map<std::string, std::string> expected = regenerate(engine);
    int identical = 0;
    for (const auto& rel : generator::engine_source_files(engine.dir)) {
      const auto it = expected.find(rel);
      if (it == expected.end()) continue;  // reported above as unlisted, or a generator change (next loop)
      if (generator::read_file(engine.dir / rel) != it->second)
        problems.push_back("file " + rel + " differs from what the generator emits for this engine's constraints");
      else
        ++identical;
    }
    for (const auto& [rel, content] : expected)
      if (!fs::exists(engine.dir / rel)) problems.push_back("file " + rel + " is emitted by the generator but missing");
    g.evidence["files_identical_to_regeneration"] = identical;
  } catch (const std::exception& e) {
    problems.push_back(std::string("cannot regenerate the engine from its manifest to compare: ") + e.what());
  }

  g.passed = problems.empty();
  g.evidence["problems"] = problems;
  g.summary = g.passed ? std::to_string(checked) + " files match their sha256 and are what the generator emits for these constraints"
                       : problems.front() + (problems.size() > 1 ? " (+" + std::to_string(problems.size() - 1) + " more)" : "");
  g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

// L0 provenance, after B0: the binary is the one B0 built, it reports this manifest, and it links no foreign
// framework. Its --version runs in the sandbox like every other run of the engine.
GateResult provenance_gate(const generator::Engine& engine, const BuildRecord& record, const GateOptions& options) {
  GateResult g{"L0_provenance", "L0", "basic_execution", false, "", {}, 0, nlohmann::json::object()};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> problems;

  // 1. The binary is the one B0 built.
  const std::string built = check_executable(engine, record, engine.binary.filename().string());
  if (!built.empty()) problems.push_back(built);
  g.evidence["binary_sha256"] = record.binary_sha256;

  // 2. It was built from this manifest: it must say so, with exit 0.
  const std::string manifest_sha = generator::sha256_file(engine.dir / "MANIFEST.json");
  std::string reported;
  if (built.empty()) {
    const Sandbox sandbox(engine.binary, record.binary_sha256, Sandbox::Mode::audited, sandbox_hidden_paths(options));
    const SandboxRun v = sandbox.run({"--version", "--json"}, 60);
    g.commands.push_back(v.result.command);
    try {
      reported = process::last_json_line(v.result.out).value("manifest_sha256", "");
    } catch (const std::exception&) {
    }
    if (v.result.exit_code != 0 || reported.empty())
      problems.push_back("`--version --json` reports no manifest_sha256 (exit " + std::to_string(v.result.exit_code) +
                         "): the binary cannot say what it was built from: " + process::tail(v.result.out + v.result.err, 300));
    else if (reported != manifest_sha)
      problems.push_back("binary reports manifest " + reported + " but MANIFEST.json hashes to " + manifest_sha +
                         " (rebuild, or the binary comes from elsewhere)");
    if (!v.outside_paths.empty()) problems.push_back("`--version` named paths outside its sandbox: " + v.outside_paths.front());
  }
  g.evidence["manifest_sha256"] = manifest_sha;
  g.evidence["binary_reports"] = reported;

  // 3. No foreign inference framework among the dynamic dependencies (ELF DT_NEEDED of the binary, then of every
  //    library it names, as the system's loader cache resolves them).
  std::vector<std::string> needed;
  try {
    needed = elf_needed_libraries(engine.binary);
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  for (const auto& lib : needed)
    for (const auto& deny : foreign_framework_deny_list())
      if (lib.rfind(deny, 0) == 0) problems.push_back("the binary links " + lib + " (a foreign framework: " + deny + "*)");
  g.evidence["dt_needed"] = needed;

  g.passed = problems.empty();
  g.evidence["problems"] = problems;
  g.summary = g.passed ? "the binary B0 built reports this manifest and links no foreign framework"
                       : problems.front() + (problems.size() > 1 ? " (+" + std::to_string(problems.size() - 1) + " more)" : "");
  g.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace mi::gates
