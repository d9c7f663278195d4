#include "footprint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ktesio::daemon::shim {
namespace {

// The lowest address of the main thread's stack mapping ("[stack]" in /proc/self/maps), or 0.
// The mapping only grows downwards, so a start read earlier stays inside it.
uintptr_t StackMappingStart() {
  static uintptr_t start = 0;
  if (start != 0) {
    return start;
  }
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return 0;
  }
  // Line by line through a buffer on the stack (not the heap, whose pages this is about): the
  // shim maps little, a sanitizer build a great deal more.
  char text[4096];
  size_t used = 0;
  for (;;) {
    const ssize_t n = read(fd, text + used, sizeof(text) - 1 - used);
    if (n <= 0) {
      break;
    }
    used += static_cast<size_t>(n);
    text[used] = '\0';
    char* line = text;
    while (char* end_of_line = std::strchr(line, '\n')) {
      *end_of_line = '\0';
      const size_t length = static_cast<size_t>(end_of_line - line);
      constexpr std::string_view kTag = " [stack]";
      if (length >= kTag.size() &&
          std::string_view(end_of_line - kTag.size(), kTag.size()) == kTag) {
        char* end = nullptr;
        const unsigned long long low = std::strtoull(line, &end, 16);
        close(fd);
        if (end == line || *end != '-') {
          return 0;
        }
        start = static_cast<uintptr_t>(low);
        return start;
      }
      line = end_of_line + 1;
    }
    // Keep the unfinished line; one longer than the buffer (a path of thousands of bytes) is
    // dropped whole, as it cannot be the stack's.
    used = static_cast<size_t>(text + used - line);
    std::memmove(text, line, used);
    if (used == sizeof(text) - 1) {
      used = 0;
    }
  }
  close(fd);
  return 0;
}

}  // namespace

__attribute__((noinline)) std::size_t ReleaseStackBelowCaller() {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t low = StackMappingStart();
  // Everything live lies above this function's frame base but its own few locals and the frame
  // of madvise's wrapper, a few hundred bytes below it: a kilobyte of margin covers them and the
  // ABI's red zone. (StackMappingStart's buffer, deeper still, is dead once it returned.)
  constexpr uintptr_t kMargin = 1024;
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (low == 0 || here < low + kMargin) {
    return 0;
  }
  const uintptr_t high = (here - kMargin) & ~(page - 1);
  if (high <= low) {
    return 0;
  }
  // MADV_DONTNEED on private anonymous memory: the pages read back as zeros when touched again,
  // which is all a stack below its pointer may hold.
  void* from = reinterpret_cast<void*>(low);  // NOLINT(performance-no-int-to-ptr): from maps
  if (madvise(from, high - low, MADV_DONTNEED) != 0) {
    return 0;
  }
  return high - low;
}

void ReleaseIdleMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  ReleaseStackBelowCaller();
}

}  // namespace ktesio::daemon::shim
