// Matching this host (CpuInfo) against the CKB's platform entries.
#pragma once
#include <string>
#include <vector>

#include "ckb/ckb.h"
#include "platform/cpu_info.h"

namespace mi::platform {

// Whether the host has every CPU feature the platform requires; `missing` receives the absent ones.
bool host_supports(const ckb::Platform& platform, const CpuInfo& cpu, std::vector<std::string>* missing = nullptr);

// "auto" -> the highest-priority platform the host supports (mi::Error if none); a named id -> that platform
// (mi::Error naming the field and the known ids if it is not in the CKB). The host need not support a named one:
// planning for another machine is allowed, running is not (the gates check).
const ckb::Platform& select_platform(const ckb::Ckb& ckb, const CpuInfo& cpu, const std::string& requested);

}  // namespace mi::platform
