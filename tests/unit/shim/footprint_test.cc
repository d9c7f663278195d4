// The shim's idle footprint: the main thread's stack pages below the caller go back to the kernel,
// and what the caller's frame holds is untouched.

#include "footprint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ktesio::daemon::shim {
namespace {

// Resident KiB of this program's executable mappings (its code), from /proc/self/smaps.
long CodeRssKib() {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_code = false;
  long total = 0;
  while (std::getline(smaps, line)) {
    if (line.find(" r-xp ") != std::string::npos || line.find(" r--p ") != std::string::npos ||
        line.find(" rw-p ") != std::string::npos || line.find(" ---p ") != std::string::npos) {
      in_code = line.find(" r-xp ") != std::string::npos && line.ends_with(exe);
    } else if (in_code && line.rfind("Rss:", 0) == 0) {
      total += std::stol(line.substr(4));
    }
  }
  return total;
}

// A function of this program that nothing calls: its first byte is patched, as a debugger would.
__attribute__((noinline, used)) int PatchTarget(int x) { return x * 7 + 3; }

// Resident KiB of the "[stack]" mapping, from /proc/self/smaps; -1 when not found.
long StackRssKib() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_stack = false;
  while (std::getline(smaps, line)) {
    if (line.find(" [stack]") != std::string::npos) {
      in_stack = true;
    } else if (in_stack && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long kib = -1;
      fields >> kib;
      return kib;
    }
  }
  return -1;
}

// ASan would move these arrays to its "fake stack" (detect_stack_use_after_return), off the
// real stack this is about.
#define KT_REAL_STACK __attribute__((no_sanitize_address, noinline))

// Touches `depth` KiB of stack below the caller, one KiB per frame.
KT_REAL_STACK int TouchStack(int depth) {
  volatile char frame[1024];
  std::memset(const_cast<char*>(frame), depth & 0x7f, sizeof(frame));
  if (depth <= 1) {
    return frame[0];
  }
  return TouchStack(depth - 1) + frame[depth % sizeof(frame)];
}

// Fills a frame of its own, goes 256 KiB deeper, releases, and checks its frame survived.
struct Released {
  long before_kib = -1;
  long after_kib = -1;
  size_t bytes = 0;
  bool frame_intact = false;
};
KT_REAL_STACK Released ReleaseBelowAFilledFrame() {
  volatile char mine[2048];
  for (size_t i = 0; i < sizeof(mine); ++i) {
    mine[i] = static_cast<char>(i * 7);
  }
  Released result;
  if (TouchStack(256) <= 0) {
    return result;
  }
  result.before_kib = StackRssKib();
  result.bytes = ReleaseStackBelowCaller();
  result.after_kib = StackRssKib();
  result.frame_intact = true;
  for (size_t i = 0; i < sizeof(mine); ++i) {
    result.frame_intact = result.frame_intact && mine[i] == static_cast<char>(i * 7);
  }
  return result;
}

TEST(ShimFootprint, StackBelowTheCallerGoesBackAndTheCallersFrameStays) {
  const Released released = ReleaseBelowAFilledFrame();
  ASSERT_GE(released.before_kib, 256) << "the recursion did not make the stack resident";
  EXPECT_GE(released.bytes, size_t{200} * 1024);
  EXPECT_LE(released.after_kib, released.before_kib - 200)
      << "before " << released.before_kib << " KiB, after " << released.after_kib << " KiB";
  EXPECT_TRUE(released.frame_intact) << "the releasing caller's frame changed";
  // The released pages come back as zero pages when the stack grows into them again.
  EXPECT_GT(TouchStack(256), 0);
}

TEST(ShimFootprint, IdleReleaseGivesBackTheStackToo) {
  ASSERT_GT(TouchStack(128), 0);
  const long before = StackRssKib();
  ReleaseIdleMemory(CodeMappings::kRelease);
  const long after = StackRssKib();
  ASSERT_GE(before, 128);
  EXPECT_LE(after, before - 100) << "before " << before << " KiB, after " << after << " KiB";
}

// A mapped file whose name ends like the stack's line must not be taken for it: the stack is found
// by the address of the releasing frame.
TEST(ShimFootprint, AFileNamedLikeTheStackIsLeftAlone) {
  char dir_template[] = "/tmp/kt-footprint-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/evil [stack]";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* mapped = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(mapped, MAP_FAILED);
  std::memset(mapped, 'k', 4096);  // private, dirty: MADV_DONTNEED would turn it back to zeros

  ASSERT_GT(TouchStack(64), 0);
  ReleaseStackBelowCaller();

  EXPECT_EQ(static_cast<char*>(mapped)[0], 'k');
  EXPECT_EQ(static_cast<char*>(mapped)[4095], 'k');
  munmap(mapped, 4096);
  unlink(path.c_str());
  rmdir(dir_template);
}

// The program's code is unmapped (it stays in the page cache) and comes back as it runs.
TEST(ShimFootprint, ReleaseCodeUnmapsTheProgramsCode) {
  const long before = CodeRssKib();
  ASSERT_GT(before, 64) << "the test binary's code is not resident";
  const std::size_t released = ReleaseCode();
  const long after = CodeRssKib();
  EXPECT_GT(released, std::size_t{64} * 1024);
  EXPECT_LT(after, before) << "before " << before << " KiB, after " << after << " KiB";
  int (*volatile call)(int) = &PatchTarget;
  EXPECT_EQ(call(2), 17) << "code that runs again maps back";
}

// A page a debugger patched (an anonymous copy in the code mapping) would lose its patch to
// MADV_DONTNEED: its segment is left mapped, the patch in place.
TEST(ShimFootprint, ReleaseCodeKeepsAPatchedSegment) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // volatile: the compiler takes a function's bytes for constants and would drop the read of the
  // original and its restoring store; and a call through a volatile pointer is a real call.
  int (*volatile call)(int) = &PatchTarget;
  auto* target = reinterpret_cast<volatile unsigned char*>(&PatchTarget);
  void* page_start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(target) & ~(page - 1));
  ASSERT_EQ(mprotect(page_start, page, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
  const unsigned char original = *target;
  *target = 0xcc;  // int3, as a breakpoint is set
  ReleaseCode();
  EXPECT_EQ(*target, 0xcc) << "the patched page was thrown away";
  *target = original;
  ASSERT_EQ(mprotect(page_start, page, PROT_READ | PROT_EXEC), 0);
  EXPECT_EQ(call(1), 10);
}

}  // namespace
}  // namespace ktesio::daemon::shim
