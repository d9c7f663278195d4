// Records which functions of ktesiod run, in the order they first run, for the link-time
// function order (bench/function-order.sh, docs/benchmarks.md). Linked only into a build made
// with -DKTESIO_FUNCTION_TRACE=ON, which compiles the daemon with -finstrument-functions: every
// function entry calls __cyg_profile_func_enter below. At exit the first-entry order is written
// to $KTESIO_FUNCTION_TRACE as one "OFFSET" (hex, from the binary's load address) per line.
//
// Nothing here may call an instrumented function (it would recurse): GCC builtins and libc only.

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KT_NO_TRACE __attribute__((no_instrument_function))

namespace {

constexpr uint64_t kSlots = 1u << 17;  // open addressing; the daemon has fewer functions
uintptr_t g_functions[kSlots];         // 0 = empty
uint32_t g_first_seen[kSlots];
uint32_t g_next;

KT_NO_TRACE void Dump() {
  const char* path = getenv("KTESIO_FUNCTION_TRACE");
  Dl_info self;
  if (path == nullptr || dladdr(reinterpret_cast<void*>(&Dump), &self) == 0) {
    return;
  }
  FILE* out = fopen(path, "w");
  if (out == nullptr) {
    return;
  }
  const auto base = reinterpret_cast<uintptr_t>(self.dli_fbase);
  for (uint64_t slot = 0; slot < kSlots; ++slot) {
    const uintptr_t fn = __atomic_load_n(&g_functions[slot], __ATOMIC_ACQUIRE);
    if (fn != 0) {
      fprintf(out, "%u %lx\n", g_first_seen[slot], static_cast<unsigned long>(fn - base));
    }
  }
  fclose(out);
}

struct AtExit {
  KT_NO_TRACE AtExit() { atexit(Dump); }
} g_at_exit;

}  // namespace

extern "C" {

KT_NO_TRACE void __cyg_profile_func_enter(void* fn, void* /*call_site*/) {
  const auto address = reinterpret_cast<uintptr_t>(fn);
  uint64_t slot = (static_cast<uint64_t>(address) * 0x9E3779B97F4A7C15ull) >> 47;
  for (uint64_t probes = 0; probes < kSlots; ++probes, slot = (slot + 1) & (kSlots - 1)) {
    uintptr_t seen = __atomic_load_n(&g_functions[slot], __ATOMIC_ACQUIRE);
    if (seen == address) {
      return;
    }
    if (seen == 0) {
      if (__atomic_compare_exchange_n(&g_functions[slot], &seen, address, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        g_first_seen[slot] = __atomic_fetch_add(&g_next, 1, __ATOMIC_RELAXED);
        return;
      }
      if (seen == address) {
        return;
      }
    }
  }
}

KT_NO_TRACE void __cyg_profile_func_exit(void* /*fn*/, void* /*call_site*/) {}

}  // extern "C"
