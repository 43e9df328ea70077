#include "platform/platform_select.h"

#include "common/error.h"

namespace mi::platform {

bool host_supports(const ckb::Platform& platform, const CpuInfo& cpu, std::vector<std::string>* missing) {
  bool ok = platform.arch == cpu.arch;
  if (!ok && missing) missing->push_back("arch " + platform.arch);
  for (const auto& f : platform.requires_features) {
    if (!cpu.has_feature(f)) {
      ok = false;
      if (missing) missing->push_back(f);
    }
  }
  return ok;
}

const ckb::Platform& select_platform(const ckb::Ckb& ckb, const CpuInfo& cpu, const std::string& requested) {
  if (requested == "auto") {
    const ckb::Platform* best = nullptr;
    for (const auto& p : ckb.platforms)
      if (host_supports(p, cpu) && (!best || p.priority > best->priority)) best = &p;
    if (!best)
      fail("platform 'auto': this host (", cpu.arch, ", features: ", [&] {
        std::string s;
        for (const auto& f : cpu.feature_names()) s += (s.empty() ? "" : " ") + f;
        return s;
      }(), ") satisfies no platform in the CKB; the minimum is x86-64-avx2 (avx2, fma, f16c)");
    return *best;
  }
  if (const ckb::Platform* p = ckb.find_platform(requested)) return *p;
  std::string known;
  for (const auto& p : ckb.platforms) known += (known.empty() ? "" : ", ") + p.id;
  fail("field 'platform.name': unknown platform \"", requested, "\" (known: auto, ", known, ")");
}

}  // namespace mi::platform
