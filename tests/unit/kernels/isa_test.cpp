// The AVX2 level must run on AVX2 machines without AVX-512: its object file may contain no EVEX-encoded
// instruction (EVEX prefix byte 0x62 in 64-bit mode, Intel SDM vol. 2 §2.7), which is what every zmm register,
// mask register k0-k7 and xmm/ymm16-31 needs. The per-level flags of cmake/KernelLevels.cmake guarantee it;
// this test checks the compiled object with objdump.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// The object CMake built from components/kernels/<level>/<level>.cpp into mi_components, next to this test binary.
fs::path level_object(const std::string& level) {
  char buf[4096];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (len <= 0) return {};
  buf[len] = '\0';
  return fs::path(buf).parent_path() / "CMakeFiles/mi_components.dir/components/kernels" / level / (level + ".cpp.o");
}

struct Disassembly {
  int instructions = 0;
  int evex = 0;
  int ymm = 0;
  std::string first_evex;
};

// Counts instructions, EVEX-encoded ones (first byte 0x62, possibly after an address-size or segment prefix)
// and ones using a ymm register, from `objdump -d` output.
Disassembly disassemble(const fs::path& object) {
  Disassembly d;
  const std::string cmd = "objdump -d --no-addresses '" + object.string() + "' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return d;
  char line[1024];
  while (fgets(line, sizeof(line), pipe)) {
    const std::string s(line);
    if (s.empty() || s[0] != '\t') continue;  // instruction lines: "\t<hex bytes> \t<mnemonic> <operands>"
    std::istringstream bytes(s.substr(1, s.find('\t', 1) - 1));
    std::string b0, b1;
    bytes >> b0 >> b1;
    if (b0.size() != 2) continue;
    ++d.instructions;
    const bool prefix = b0 == "67" || b0 == "26" || b0 == "2e" || b0 == "36" || b0 == "3e" || b0 == "64" || b0 == "65";
    if (b0 == "62" || (prefix && b1 == "62")) {
      if (d.evex++ == 0) d.first_evex = s;
    }
    if (s.find("%ymm") != std::string::npos) ++d.ymm;
  }
  pclose(pipe);
  return d;
}

TEST(KernelIsa, Avx2ObjectHasNoAvx512Instruction) {
  const fs::path object = level_object("avx2");
  if (!fs::exists(object)) GTEST_SKIP() << "not run: AVX2 kernel object not found at " << object;
  if (std::system("objdump --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "not run: objdump not installed";
  const Disassembly d = disassemble(object);
  ASSERT_GT(d.instructions, 100) << "could not disassemble " << object;
  EXPECT_GT(d.ymm, 100) << "the AVX2 level should be vectorised with ymm registers";
  EXPECT_EQ(d.evex, 0) << "EVEX (AVX-512) instruction in the AVX2 level, first: " << d.first_evex;
}

// The detector itself must see EVEX code where there is some, or the test above could never fail.
TEST(KernelIsa, DetectorFindsAvx512InstructionsInTheAvx512Object) {
  const fs::path object = level_object("avx512");
  if (!fs::exists(object)) GTEST_SKIP() << "not run: AVX-512 kernel object not found at " << object;
  if (std::system("objdump --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "not run: objdump not installed";
  EXPECT_GT(disassemble(object).evex, 100);
}

// A weak (COMDAT) symbol in a level's object is an inline function the linker may merge with the copy from
// another translation unit; if the kept copy is the one compiled with wider ISA flags, code meant for every CPU
// would run AVX-512 instructions. The level sources keep all helpers internal, so none may appear.
TEST(KernelIsa, LevelObjectsDefineNoWeakSymbols) {
  if (std::system("nm --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "not run: nm not installed";
  for (const std::string level : {"avx2", "avx512", "avx512bf16", "amx"}) {
    const fs::path object = level_object(level);
    if (!fs::exists(object)) GTEST_SKIP() << "not run: kernel object not found at " << object;
    const std::string cmd = "nm -C '" + object.string() + "' 2>/dev/null";
    FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char line[2048];
    int defined = 0;
    std::string weak;
    while (fgets(line, sizeof(line), pipe)) {
      const std::string s(line);
      if (s.size() > 19 && s[0] != ' ') ++defined;  // "<16 hex digits> <type> <name>"; undefined: no address
      if (s.size() > 19 && (s[17] == 'W' || s[17] == 'V' || s[17] == 'u')) weak += s;
    }
    pclose(pipe);
    EXPECT_GT(defined, 10) << "could not read the symbols of " << object;
    EXPECT_TRUE(weak.empty()) << level << " defines weak symbols:\n" << weak;
  }
}

}  // namespace
