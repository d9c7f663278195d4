#include "footprint.h"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ktesio::daemon::shim {
namespace {

// The lowest address of the mapping that holds `frame` (the main thread's stack), or 0 when
// /proc/self/maps cannot be read. Found by address, not by the "[stack]" name a mapped file could
// also end with. The stack only grows downwards, so a start found once stays below every later
// frame; a failure is remembered too, so /proc is not read again at every idle release.
uintptr_t StackMappingStart(uintptr_t frame) {
  static uintptr_t start = 0;
  static bool failed = false;
  if (start != 0 && start <= frame) {
    return start;
  }
  if (failed) {
    return 0;
  }
  failed = true;
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return 0;
  }
  // Line by line through a buffer on the stack (not the heap, whose pages this is about): the
  // shim maps little, a sanitizer build a great deal more. Only the "low-high" range at the start
  // of a line is read, so the tail of a line longer than the buffer (a long path) is skipped.
  const auto holds_frame = [frame](const char* line, uintptr_t* low_out) {
    char* end = nullptr;
    const unsigned long long low = std::strtoull(line, &end, 16);
    if (end == line || *end != '-') {
      return false;
    }
    char* after = nullptr;
    const unsigned long long high = std::strtoull(end + 1, &after, 16);
    *low_out = static_cast<uintptr_t>(low);
    return after != end + 1 && low <= frame && frame < high;
  };
  char text[4096];
  size_t used = 0;
  bool in_tail = false;  // reading the rest of a line longer than the buffer
  uintptr_t low = 0;
  bool found = false;
  while (!found) {
    const ssize_t n = read(fd, text + used, sizeof(text) - 1 - used);
    if (n <= 0) {
      break;
    }
    used += static_cast<size_t>(n);
    text[used] = '\0';
    char* line = text;
    while (char* end_of_line = std::strchr(line, '\n')) {
      *end_of_line = '\0';
      found = !in_tail && holds_frame(line, &low);
      if (found) {
        break;
      }
      in_tail = false;
      line = end_of_line + 1;
    }
    used = static_cast<size_t>(text + used - line);
    std::memmove(text, line, used);
    if (!found && used == sizeof(text) - 1) {
      found = !in_tail && holds_frame(text, &low);
      in_tail = true;
      used = 0;
    }
  }
  close(fd);
  if (!found) {
    return 0;
  }
  start = low;
  failed = false;
  return start;
}

// The main program's read-only segments (its code and constants), whole pages only.
struct Segments {
  static constexpr size_t kMax = 4;
  std::array<uintptr_t, kMax> begin{};
  std::array<uintptr_t, kMax> end{};
  size_t count = 0;
};

int CollectReadOnlySegments(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* segments = static_cast<Segments*>(data);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < info->dlpi_phnum && segments->count < Segments::kMax; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_W) != 0) {
      continue;
    }
    const uintptr_t begin = (info->dlpi_addr + header.p_vaddr + page - 1) & ~(page - 1);
    const uintptr_t end = (info->dlpi_addr + header.p_vaddr + header.p_memsz) & ~(page - 1);
    if (begin < end) {
      segments->begin[segments->count] = begin;
      segments->end[segments->count] = end;
      ++segments->count;
    }
  }
  return 1;  // the main program comes first; shared libraries (a sanitizer build's) are left be
}

}  // namespace

std::size_t ReleaseCode() {
  Segments segments;
  dl_iterate_phdr(&CollectReadOnlySegments, &segments);
  if (segments.count == 0) {
    return 0;
  }
  // A page of them a debugger or a uprobe wrote its breakpoint into is an anonymous copy that
  // MADV_DONTNEED would throw away with the breakpoint: a segment with any such page is kept.
  // /proc/self/pagemap tells, per page: present or swapped, and not a file page. Unreadable,
  // nothing is released.
  std::array<bool, Segments::kMax> patched{};
  const int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0) {
    return 0;
  }
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  constexpr uint64_t kPresent = uint64_t{1} << 63;
  constexpr uint64_t kSwapped = uint64_t{1} << 62;
  constexpr uint64_t kFilePage = uint64_t{1} << 61;
  std::array<uint64_t, 512> entries;  // on the stack: the heap's pages are what this file is about
  bool readable = true;
  for (size_t i = 0; i < segments.count && readable; ++i) {
    for (uintptr_t at = segments.begin[i]; at < segments.end[i] && !patched[i];) {
      const size_t count = std::min<size_t>(entries.size(), (segments.end[i] - at) / page);
      const auto bytes = static_cast<ssize_t>(count * sizeof(uint64_t));
      if (pread(pagemap, entries.data(), static_cast<size_t>(bytes),
                static_cast<off_t>(at / page * sizeof(uint64_t))) != bytes) {
        readable = false;
        break;
      }
      for (size_t k = 0; k < count; ++k) {
        const uint64_t e = entries[k];
        patched[i] = patched[i] || ((e & (kPresent | kSwapped)) != 0 && (e & kFilePage) == 0);
      }
      at += count * page;
    }
  }
  close(pagemap);
  if (!readable) {
    return 0;
  }
  std::size_t released = 0;
  for (size_t i = 0; i < segments.count; ++i) {
    if (patched[i]) {
      continue;
    }
    void* from = reinterpret_cast<void*>(segments.begin[i]);  // NOLINT(performance-no-int-to-ptr)
    if (madvise(from, segments.end[i] - segments.begin[i], MADV_DONTNEED) == 0) {
      released += segments.end[i] - segments.begin[i];
    }
  }
  return released;
}

__attribute__((noinline)) std::size_t ReleaseStackBelowCaller() {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Everything live lies above this function's frame base but its own few locals and the frame
  // of madvise's wrapper, a few hundred bytes below it: a kilobyte of margin covers them and the
  // ABI's red zone. (StackMappingStart's buffer, deeper still, is dead once it returned.)
  constexpr uintptr_t kMargin = 1024;
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const uintptr_t low = StackMappingStart(here);
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

void ReleaseIdleMemory(CodeMappings code) {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  if (code == CodeMappings::kRelease) {
    ReleaseCode();
  }
  ReleaseStackBelowCaller();
}

}  // namespace ktesio::daemon::shim
