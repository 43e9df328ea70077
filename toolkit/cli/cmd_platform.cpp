// `metainfer platform [--json]`: what CPUID and the OS say about this machine, and which CKB platform it runs.
#include <iostream>

#include "ckb/ckb.h"
#include "cli/commands.h"
#include "platform/bandwidth.h"
#include "platform/cpu_info.h"
#include "platform/platform_select.h"

namespace mi::cli {

void register_platform_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("platform", "Show CPU features, cores, caches, memory and the matching CKB platform");
  auto json_flag = std::make_shared<bool>(false);
  auto ckb_dir = std::make_shared<std::string>(ckb::default_ckb_dir().string());
  auto bandwidth = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json_flag, "print one JSON object");
  cmd->add_flag("--bandwidth", *bandwidth, "also measure memory read bandwidth (1 GiB buffer, best of several access patterns, 1..N threads)");
  cmd->add_option("--ckb", *ckb_dir, "CKB directory");
  cmd->callback([json_flag, ckb_dir, bandwidth, &exit_code] {
    const platform::CpuInfo cpu = platform::detect_cpu();
    const ckb::Ckb ckb = ckb::load(*ckb_dir);
    nlohmann::json platforms = nlohmann::json::array();
    std::string best;
    int best_priority = -1;
    for (const auto& p : ckb.platforms) {
      std::vector<std::string> missing;
      const bool ok = platform::host_supports(p, cpu, &missing);
      platforms.push_back({{"id", p.id}, {"runs_here", ok}, {"missing", missing}});
      if (ok && p.priority > best_priority) best = p.id, best_priority = p.priority;
    }
    nlohmann::json j = cpu.to_json();
    j["ckb_platforms"] = platforms;
    j["auto_platform"] = best.empty() ? nlohmann::json(nullptr) : nlohmann::json(best);
    if (*bandwidth) {
      // One probe (platform/bandwidth.h): every access pattern at thread counts 1..N; per count the best pattern.
      const int all = std::max(1, cpu.allowed_cpus);
      platform::BandwidthOptions bo;
      bo.max_threads = all;
      const platform::ReadBandwidth bw = platform::probe_read_bandwidth(bo);
      j["read_bandwidth_gbs"] = {{"threads_1", bw.best_at(1)}, {"threads_" + std::to_string(all), bw.best_at(all)}};
      j["read_bandwidth"] = bw.to_json();
    }
    if (*json_flag) {
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "cpu       " << cpu.brand << " (" << cpu.vendor << ", " << cpu.arch << ")\n";
      std::cout << "features ";
      for (const auto& f : cpu.feature_names()) std::cout << " " << f;
      std::cout << "\ncores     " << cpu.logical_cpus << " logical, " << cpu.physical_cores << " physical, "
                << cpu.allowed_cpus << " allowed for this process\n";
      for (const auto& c : cpu.caches)
        std::cout << "cache     L" << c.level << " " << c.type << " " << (c.size_bytes >> 10) << " KiB (shared by "
                  << c.shared_by_cpus << " CPUs)\n";
      std::cout << "memory    " << (cpu.memory_total_bytes >> 20) << " MiB total, " << (cpu.memory_available_bytes >> 20)
                << " MiB available\n";
      for (const auto& p : platforms) {
        std::cout << "platform  " << p["id"].get<std::string>() << ": "
                  << (p["runs_here"].get<bool>() ? "runs here" : "not here (missing " + p["missing"].dump() + ")") << "\n";
      }
      std::cout << "auto      " << (best.empty() ? "(none)" : best) << "\n";
      if (*bandwidth) {
        for (const auto& [k, v] : j["read_bandwidth_gbs"].items())
          std::cout << "read bw   " << v.get<double>() << " GB/s (" << k << ", wall clock)\n";
        const auto& bw = j["read_bandwidth"];
        std::cout << "read bw   " << bw["best_gbs"].get<double>() << " GB/s (best: " << bw["best_pattern"].get<std::string>()
                  << ", " << bw["best_threads"].get<int>() << " threads, " << bw["isa"].get<std::string>() << " loads)\n";
      }
    }
    exit_code = kExitOk;
  });
}

}  // namespace mi::cli
