// The shim's idle footprint: the main thread's stack pages below the caller go back to the kernel,
// and what the caller's frame holds is untouched.

#include "footprint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ktesio::daemon::shim {
namespace {

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

// Touches `depth` KiB of stack below the caller, one KiB per frame.
__attribute__((noinline)) int TouchStack(int depth) {
  volatile char frame[1024];
  std::memset(const_cast<char*>(frame), depth & 0x7f, sizeof(frame));
  if (depth <= 1) {
    return frame[0];
  }
  return TouchStack(depth - 1) + frame[depth % sizeof(frame)];
}

TEST(ShimFootprint, StackBelowTheCallerGoesBackAndTheCallersFrameStays) {
  volatile char mine[2048];
  for (size_t i = 0; i < sizeof(mine); ++i) {
    mine[i] = static_cast<char>(i * 7);
  }
  ASSERT_GT(TouchStack(256), 0);  // 256 KiB deeper than this frame
  const long before = StackRssKib();
  ASSERT_GE(before, 256) << "the recursion did not make the stack resident";

  const size_t released = ReleaseStackBelowCaller();
  const long after = StackRssKib();

  EXPECT_GE(released, size_t{200} * 1024);
  EXPECT_LE(after, before - 200) << "before " << before << " KiB, after " << after << " KiB";
  for (size_t i = 0; i < sizeof(mine); ++i) {
    ASSERT_EQ(mine[i], static_cast<char>(i * 7)) << "the caller's frame changed at " << i;
  }
  // The released pages come back as zero pages when the stack grows into them again.
  EXPECT_GT(TouchStack(256), 0);
}

TEST(ShimFootprint, ReleasingTwiceFindsNothingNewAndIdleReleaseRuns) {
  ASSERT_GT(TouchStack(64), 0);
  ReleaseStackBelowCaller();
  const long once = StackRssKib();
  ReleaseIdleMemory();
  const long twice = StackRssKib();
  ASSERT_GT(once, 0);
  EXPECT_LE(twice, once + 8);  // at most the frames of the second call came back
}

}  // namespace
}  // namespace ktesio::daemon::shim
