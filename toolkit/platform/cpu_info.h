// What this machine can run: CPUID feature bits (checked against what the OS enabled via XGETBV), cores, caches,
// memory. Source: Intel SDM Vol. 2A "CPUID" (leaves 0x1, 0x7, 0x80000002-4) and Vol. 1 §13 (XCR0 state bits).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::platform {

struct CacheLevel {
  int level = 0;          // 1, 2, 3
  std::string type;       // "Data", "Instruction", "Unified"
  std::uint64_t size_bytes = 0;
  int shared_by_cpus = 0;  // logical CPUs sharing this cache
};

struct CpuInfo {
  std::string vendor;       // "GenuineIntel", "AuthenticAMD"
  std::string brand;        // CPUID brand string
  int family = 0, model = 0;  // CPUID display family and model (AMD Zen 4: family 25, Zen 5: 26); 0 when unknown
  std::string arch;         // "x86_64" or what uname says
  // Feature bits: true only when the CPU reports the feature AND the OS saves its register state.
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  int logical_cpus = 0;
  int physical_cores = 0;   // distinct (package, core) pairs from /sys; 0 when unknown
  int allowed_cpus = 0;     // CPUs this process may run on (sched_getaffinity)
  std::vector<CacheLevel> caches;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;

  // Names of the CPU features present, in the vocabulary of ckb/platforms/*.toml "requires" lists
  // ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "amx_tile", ...).
  std::vector<std::string> feature_names() const;
  bool has_feature(const std::string& name) const;
  nlohmann::json to_json() const;
};

// Reads CPUID, XGETBV, /sys and /proc. Never throws: unknown values stay zero/empty.
CpuInfo detect_cpu();

}  // namespace mi::platform
