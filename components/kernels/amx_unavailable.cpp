#include "kernels/amx_unavailable.h"

#include "common/error.h"

namespace mi::kernels {
void fail_amx_unavailable() {
  fail("kernel level amx: this CPU or OS does not provide AMX-BF16 tiles (CPUID AMX-TILE/AMX-BF16, and Linux "
       "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)); generate the engine for platform x86-64-avx512bf16");
}
}  // namespace mi::kernels
