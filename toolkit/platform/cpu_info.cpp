#include "platform/cpu_info.h"

#include <sched.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MI_HAVE_CPUID 1
#endif

namespace mi::platform {
namespace {

bool amx_permission_granted() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return granted;
#else
  return false;
#endif
}

namespace fs = std::filesystem;

std::string read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// "48K" / "2048K" / "32M" as in /sys/devices/system/cpu/cpu0/cache/index*/size.
std::uint64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  std::uint64_t v = std::strtoull(s.c_str(), nullptr, 10);
  switch (s.back()) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return v;
  }
}

// Counts CPUs in a /sys cpulist such as "0-3,8,10-11".
int count_cpulist(const std::string& list) {
  int count = 0;
  std::stringstream ss(list);
  std::string range;
  while (std::getline(ss, range, ',')) {
    auto dash = range.find('-');
    if (range.empty()) continue;
    if (dash == std::string::npos) {
      ++count;
    } else {
      count += std::stoi(range.substr(dash + 1)) - std::stoi(range.substr(0, dash)) + 1;
    }
  }
  return count;
}

void detect_features(CpuInfo& info) {
#ifdef MI_HAVE_CPUID
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  info.vendor = vendor;

  __get_cpuid(1, &a, &b, &c, &d);
  // Display family and model (Intel SDM Vol. 2A, CPUID leaf 01H, EAX; AMD APM Vol. 3, CPUID Fn0000_0001_EAX): the
  // extended family is added when the base family is 0xF, the extended model prepended when the base family is 6
  // or 0xF (AMD parts of base family 6 have an extended model of 0, so the one rule serves both vendors).
  const unsigned base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
  const unsigned ext_family = (a >> 20) & 0xFF, ext_model = (a >> 16) & 0xF;
  info.family = int(base_family == 0xF ? base_family + ext_family : base_family);
  info.model = int(base_family == 0xF || base_family == 6 ? (ext_model << 4) | base_model : base_model);
  const bool osxsave = c & (1u << 27);
  info.sse42 = c & (1u << 20);
  const bool cpu_avx = c & (1u << 28), cpu_fma = c & (1u << 12), cpu_f16c = c & (1u << 29);

  // XCR0: bit 1 SSE, 2 AVX (YMM upper), 5-7 AVX-512 (opmask, ZMM_Hi256, Hi16_ZMM), 17-18 AMX (XTILECFG, XTILEDATA).
  std::uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (std::uint64_t(hi) << 32) | lo;
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  // AMX tile state: XCR0 bits 17-18 enabled by the OS, and (Linux >= 5.16) this process granted the tile data
  // state on request (arch_prctl ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18); an engine built for AMX
  // makes the same request (kernels/amx), so a host that refuses it is not reported as running x86-64-amx.
  const bool os_amx = (xcr0 & 0x60000) == 0x60000 && amx_permission_granted();

  info.avx = cpu_avx && os_avx;
  info.fma = cpu_fma && os_avx;
  info.f16c = cpu_f16c && os_avx;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_subleaf = a;
    info.avx2 = (b & (1u << 5)) && os_avx;
    info.avx512f = (b & (1u << 16)) && os_avx512;
    info.avx512dq = (b & (1u << 17)) && os_avx512;
    info.avx512bw = (b & (1u << 30)) && os_avx512;
    info.avx512vl = (b & (1u << 31)) && os_avx512;
    info.amx_bf16 = (d & (1u << 22)) && os_amx;
    info.amx_tile = (d & (1u << 24)) && os_amx;
    info.amx_int8 = (d & (1u << 25)) && os_amx;
    if (max_subleaf >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      info.avx512_bf16 = (a & (1u << 5)) && os_avx512;
    }
  }
  __get_cpuid(0x80000000, &a, &b, &c, &d);
  if (a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002 + leaf, &a, &b, &c, &d);
      std::memcpy(brand + leaf * 16 + 0, &a, 4);
      std::memcpy(brand + leaf * 16 + 4, &b, 4);
      std::memcpy(brand + leaf * 16 + 8, &c, 4);
      std::memcpy(brand + leaf * 16 + 12, &d, 4);
    }
    std::string s = brand;
    s.erase(0, s.find_first_not_of(' '));
    info.brand = s;
  }
#endif
}

void detect_topology(CpuInfo& info) {
  info.logical_cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) info.allowed_cpus = CPU_COUNT(&set);

  std::set<std::pair<std::string, std::string>> cores;
  const fs::path cpus = "/sys/devices/system/cpu";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cpus, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || !std::isdigit(static_cast<unsigned char>(name[3]))) continue;
    const std::string pkg = read_first_line(entry.path() / "topology/physical_package_id");
    const std::string core = read_first_line(entry.path() / "topology/core_id");
    if (!core.empty()) cores.insert({pkg, core});
  }
  info.physical_cores = int(cores.size());

  for (int index = 0; index < 16; ++index) {
    const fs::path dir = cpus / "cpu0/cache" / ("index" + std::to_string(index));
    if (!fs::exists(dir, ec)) break;
    CacheLevel cache;
    cache.level = std::atoi(read_first_line(dir / "level").c_str());
    cache.type = read_first_line(dir / "type");
    cache.size_bytes = parse_size(read_first_line(dir / "size"));
    cache.shared_by_cpus = count_cpulist(read_first_line(dir / "shared_cpu_list"));
    info.caches.push_back(cache);
  }
}

void detect_memory(CpuInfo& info) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t value_kb;
  std::string unit;
  while (in >> key >> value_kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") info.memory_total_bytes = value_kb << 10;
    if (key == "MemAvailable:") info.memory_available_bytes = value_kb << 10;
  }
}

}  // namespace

CpuInfo detect_cpu() {
  CpuInfo info;
  utsname u{};
  if (uname(&u) == 0) info.arch = u.machine;
  detect_features(info);
  detect_topology(info);
  detect_memory(info);
  return info;
}

std::vector<std::string> CpuInfo::feature_names() const {
  std::vector<std::string> names;
  const std::pair<const char*, bool> all[] = {
      {"sse4_2", sse42},       {"avx", avx},           {"avx2", avx2},           {"fma", fma},
      {"f16c", f16c},          {"avx512f", avx512f},   {"avx512bw", avx512bw},   {"avx512vl", avx512vl},
      {"avx512dq", avx512dq},  {"avx512_bf16", avx512_bf16}, {"amx_tile", amx_tile}, {"amx_bf16", amx_bf16},
      {"amx_int8", amx_int8}};
  for (const auto& [name, present] : all)
    if (present) names.push_back(name);
  return names;
}

bool CpuInfo::has_feature(const std::string& name) const {
  const auto names = feature_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

nlohmann::json CpuInfo::to_json() const {
  nlohmann::json caches_json = nlohmann::json::array();
  for (const auto& c : caches)
    caches_json.push_back({{"level", c.level}, {"type", c.type}, {"size_bytes", c.size_bytes},
                           {"shared_by_cpus", c.shared_by_cpus}});
  return {{"arch", arch},
          {"vendor", vendor},
          {"brand", brand},
          {"family", family},
          {"model", model},
          {"features", feature_names()},
          {"logical_cpus", logical_cpus},
          {"physical_cores", physical_cores},
          {"allowed_cpus", allowed_cpus},
          {"caches", caches_json},
          {"memory_total_bytes", memory_total_bytes},
          {"memory_available_bytes", memory_available_bytes}};
}

}  // namespace mi::platform
