// The idle memory trim (ktesiod/memory/trim.h) on this very process: a real file mapping, real
// madvise, the real /proc/self/maps. No fakes: what is asserted is what the kernel did.

#include "memory/trim.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/spdlog.h"

namespace ktesio::daemon::memory {
namespace {

// Pages of [at, at + length) in the page cache, by mincore.
size_t CachedPages(void* at, size_t length) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((length + page - 1) / page);
  if (mincore(at, length, in_core.data()) != 0) {
    return 0;
  }
  size_t cached = 0;
  for (unsigned char flag : in_core) {
    cached += flag & 1;
  }
  return cached;
}

// A 4 MiB file of this test's own (so that even an unprivileged run may page it out), written,
// synced (clean pages only: dirty ones would need writeback first) and mapped read-only. It is
// made in the working directory (ctest's: the build tree, on disk) because /tmp may be a tmpfs,
// whose pages can only go to swap.
class MappedFile {
 public:
  static constexpr size_t kBytes = 4u << 20;

  MappedFile() {
    std::string templ = "trim-test-XXXXXX";
    fd_ = mkstemp(templ.data());
    path_ = templ;
    std::vector<char> chunk(1 << 16, 'k');
    for (size_t written = 0; written < kBytes; written += chunk.size()) {
      EXPECT_EQ(write(fd_, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
    }
    EXPECT_EQ(fsync(fd_), 0);
    at_ = mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd_, 0);
  }
  ~MappedFile() {
    munmap(at_, kBytes);
    close(fd_);
    unlink(path_.c_str());
  }
  bool ok() const { return fd_ >= 0 && at_ != MAP_FAILED; }
  bool on_tmpfs() const {
    struct statfs fs {};
    return fstatfs(fd_, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  }
  void* at() const { return at_; }
  // Touches every page; returns the sum of their first bytes (so nothing is optimised away).
  uint64_t TouchAll() const {
    uint64_t sum = 0;
    const auto* bytes = static_cast<const volatile unsigned char*>(at_);
    for (size_t offset = 0; offset < kBytes; offset += 4096) {
      sum += bytes[offset];
    }
    return sum;
  }

 private:
  int fd_ = -1;
  std::string path_;
  void* at_ = MAP_FAILED;
};

TEST(TrimWorkingSetTest, DropsTheCleanPagesOfAFileOnlyThisProcessMapsAndKeepsThemReadable) {
  MappedFile file;
  ASSERT_TRUE(file.ok());
  if (file.on_tmpfs()) {
    GTEST_SKIP() << "the working directory is a tmpfs: its pages can only be swapped";
  }
  const uint64_t sum = file.TouchAll();
  ASSERT_EQ(sum, uint64_t{'k'} * (MappedFile::kBytes / 4096));
  const size_t pages = MappedFile::kBytes / 4096;
  ASSERT_GT(CachedPages(file.at(), MappedFile::kBytes), pages / 2);

  absl::StatusOr<TrimReport> report = TrimWorkingSet();
  if (absl::IsUnimplemented(report.status())) {
    GTEST_SKIP() << report.status();
  }
  ASSERT_TRUE(report.ok()) << report.status();
  if (!report->paged_out) {
    GTEST_SKIP() << "this kernel has no MADV_PAGEOUT";
  }
  EXPECT_GT(report->mappings, 0u);
  EXPECT_GE(report->advised_kib, MappedFile::kBytes / 1024);
  EXPECT_GT(report->rss_before_kib, 0u);
  // The kernel reclaimed the file's pages: most are gone from the page cache.
  EXPECT_LT(CachedPages(file.at(), MappedFile::kBytes), pages / 2);
  // They fault back in with the same bytes, and this test's own code (paged out too) still runs.
  EXPECT_EQ(file.TouchAll(), sum);
}

// What a trim must never do is lose data: advice that discards pages (MADV_DONTNEED on private
// memory zero-fills them) on the heap or an anonymous mapping would show here as lost bytes.
TEST(TrimWorkingSetTest, KeepsTheHeapAndAnonymousMemoryIntact) {
  std::vector<char> heap(1 << 20, 'h');
  void* anon = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  memset(anon, 'a', 1 << 20);
  absl::StatusOr<TrimReport> report = TrimWorkingSet();
  if (absl::IsUnimplemented(report.status())) {
    GTEST_SKIP() << report.status();
  }
  ASSERT_TRUE(report.ok()) << report.status();
  for (size_t i = 0; i < (1u << 20); i += 4093) {
    ASSERT_EQ(static_cast<char*>(anon)[i], 'a') << i;
    ASSERT_EQ(heap[i], 'h') << i;
  }
  munmap(anon, 1 << 20);
}

// One field ("Rss", "Anonymous") of the mapping that holds `address`, in KiB, from
// /proc/self/smaps; -1 when no mapping holds it.
int64_t SmapsKib(const void* address, const std::string& field) {
  FILE* smaps = fopen("/proc/self/smaps", "re");
  if (smaps == nullptr) {
    return -1;
  }
  const auto at = reinterpret_cast<uintptr_t>(address);
  char line[8192];
  bool inside = false;
  int64_t value = -1;
  const std::string prefix = field + ":";
  while (value < 0 && fgets(line, sizeof line, smaps) != nullptr) {
    uintptr_t start = 0;
    uintptr_t end = 0;
    char dash = 0;
    if (sscanf(line, "%" SCNxPTR "%c%" SCNxPTR, &start, &dash, &end) == 3 && dash == '-') {
      inside = start <= at && at < end;
    } else if (inside && strncmp(line, prefix.c_str(), prefix.size()) == 0) {
      value = strtoll(line + prefix.size(), nullptr, 10);
    }
  }
  fclose(smaps);
  return value;
}

// Code of this test binary that the tests below can point at.
__attribute__((noinline)) int CodeOfThisBinary(int x) { return x * 7 + 1; }

// Data the release must never touch: writable, relocated at load (a vtable), set at run time.
struct Shape {
  virtual ~Shape() = default;
  virtual int Sides() const { return 0; }
};
struct Square final : Shape {
  int Sides() const override { return 4; }
};
int g_set_at_run_time = 0;  // NOLINT: a mutable global on purpose

TEST(ReleaseCodeTest, UnmapsThisBinarysCodeAndEverythingKeepsWorking) {
  g_set_at_run_time = 41;
  std::unique_ptr<Shape> shape = std::make_unique<Square>();
  std::function<int(int)> call = CodeOfThisBinary;
  const void* code = reinterpret_cast<const void*>(&CodeOfThisBinary);
  const int64_t before = SmapsKib(code, "Rss");
  ASSERT_GT(before, 0);
  ASSERT_EQ(SmapsKib(code, "Anonymous"), 0) << "this binary's code holds patched pages";

  absl::StatusOr<TrimReport> report = ReleaseCode();
  ASSERT_TRUE(report.ok()) << report.status();
  // This binary, libc, libstdc++, ...: several objects, each with read-only segments.
  EXPECT_GE(report->mappings, 3u);
  EXPECT_GT(report->advised_kib, 0u);
  // Only what ran since is mapped again (reading smaps, this test), well under what was.
  EXPECT_LT(SmapsKib(code, "Rss"), before);
  // Code faults back in and runs; data and relocations are untouched.
  EXPECT_EQ(call(6), 43);
  EXPECT_EQ(shape->Sides(), 4);
  EXPECT_EQ(g_set_at_run_time, 41);
}

// A debugger's breakpoint or a uprobe is a private copy of a code page: a release that dropped
// it would silently remove the patch. Here the test patches a page of its own code (writing
// back the byte that is there) and checks the private copy survives the release.
TEST(ReleaseCodeTest, LeavesCodeADebuggerPatchedAlone) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto* code = reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(&CodeOfThisBinary) &
                                                ~(page - 1));
  if (mprotect(code, page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    GTEST_SKIP() << "cannot make code writable here: " << strerror(errno);
  }
  *static_cast<volatile unsigned char*>(code) = *code;  // the private copy a patch makes
  ASSERT_EQ(mprotect(code, page, PROT_READ | PROT_EXEC), 0) << strerror(errno);
  ASSERT_GE(SmapsKib(code, "Anonymous"), 4);

  absl::StatusOr<TrimReport> report = ReleaseCode();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->mappings, 0u);            // the other objects are still released
  EXPECT_GE(SmapsKib(code, "Anonymous"), 4);  // the patched page is still the private copy
  EXPECT_EQ(CodeOfThisBinary(6), 43);

  // Swapped out, the private copy is no less a patch: the release must not discard it either.
#if defined(MADV_PAGEOUT)
  if (madvise(code, page, MADV_PAGEOUT) == 0 && SmapsKib(code, "Swap") >= 4) {
    report = ReleaseCode();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_GE(SmapsKib(code, "Swap") + SmapsKib(code, "Anonymous"), 4);
  } else {
    std::fprintf(stderr, "no swap here: the swapped-out copy case is not exercised\n");
  }
#endif

  // Undo the patch (the file's page again), so the other tests see clean code.
  ASSERT_EQ(madvise(code, page, MADV_DONTNEED), 0) << strerror(errno);
  EXPECT_EQ(SmapsKib(code, "Anonymous"), 0);
}

// Waits up to 10 s for `done`; the windows below are 50 ms, so this only bounds a broken run.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

bool TrimSupported() { return !absl::IsUnimplemented(TrimWorkingSet().status()); }

// The trim and the code release follow one pattern: once after start-up, never again without
// calls, once after calls have gone quiet, held off while a call stays open (a followed log).
// `count` reads trims() or releases().
void ExpectOnceAfterEachQuiet(std::atomic<uint64_t>& calls, std::atomic<uint64_t>& open,
                              const std::function<uint64_t()>& count) {
  ASSERT_TRUE(Eventually([&] { return count() == 1; }));
  // Quiet with no new activity: no second one.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(count(), 1u);
  // Activity, then quiet: one more.
  calls += 3;
  ASSERT_TRUE(Eventually([&] { return count() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(count(), 2u);
  // A call that stays open holds it off however long it lasts.
  open = 1;
  calls += 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(count(), 2u);
  open = 0;
  ASSERT_TRUE(Eventually([&] { return count() == 3; }));
}

std::shared_ptr<spdlog::logger> NullLog() {
  return std::make_shared<spdlog::logger>("trim", std::make_shared<spdlog::sinks::null_sink_mt>());
}

TEST(IdleTrimmerTest, TrimsAfterStartUpThenOnlyAfterNewActivityHasGoneQuiet) {
  if (!TrimSupported()) {
    GTEST_SKIP() << TrimWorkingSet().status();
  }
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> open{0};
  IdleTrimmer trimmer(
      absl::Milliseconds(50),
      [&] {
        return Activity{calls.load(), open.load()};
      },
      [] { return true; }, absl::ZeroDuration(), NullLog());
  ExpectOnceAfterEachQuiet(calls, open, [&] { return trimmer.trims(); });
}

TEST(IdleTrimmerTest, KeepsWaitingWhileActivityContinues) {
  if (!TrimSupported()) {
    GTEST_SKIP() << TrimWorkingSet().status();
  }
  std::atomic<uint64_t> calls{0};
  std::atomic<bool> busy{true};
  auto log =
      std::make_shared<spdlog::logger>("trim", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::thread client([&] {
    while (busy) {
      calls += 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  {
    // A 500 ms window against a call every 5 ms: only a stall of half a second looks quiet.
    IdleTrimmer trimmer(
        absl::Milliseconds(500),
        [&calls] {
          return Activity{calls.load(), 0};
        },
        [] { return true; }, absl::ZeroDuration(), log);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_EQ(trimmer.trims(), 0u);  // never a whole window without a call
    busy = false;
    client.join();
    EXPECT_TRUE(Eventually([&] { return trimmer.trims() == 1; }));
  }  // the destructor stops the thread promptly, mid-window
}

TEST(IdleTrimmerTest, ReleasesStartUpCodeOnceBootIsDoneAndSettledThenTrims) {
  if (!TrimSupported()) {
    GTEST_SKIP() << TrimWorkingSet().status();
  }
  std::atomic<bool> booted{false};
  auto log =
      std::make_shared<spdlog::logger>("trim", std::make_shared<spdlog::sinks::null_sink_mt>());
  IdleTrimmer trimmer(
      absl::Milliseconds(50), [] { return Activity{}; }, [&booted] { return booted.load(); },
      absl::Milliseconds(200), log);
  // Boot is not done: nothing is released, nothing trimmed, however long it takes.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(trimmer.releases(), 0u);
  EXPECT_EQ(trimmer.trims(), 0u);
  booted = true;
  // Not before the settle time (200 ms after the boot is seen, polled every 100 ms): a slow
  // machine only makes the release later.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(trimmer.releases(), 0u);
  // Released once, after the settle time, then the first quiet window trims.
  ASSERT_TRUE(Eventually([&] { return trimmer.releases() == 1; }));
  ASSERT_TRUE(Eventually([&] { return trimmer.trims() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(trimmer.releases(), 1u);
}

TEST(IdleTrimmerTest, ReleasesCodeAgainAMomentAfterCallsLongBeforeTheTrim) {
  if (!TrimSupported()) {
    GTEST_SKIP() << TrimWorkingSet().status();
  }
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> open{0};
  // A trim window no test waits out, the release after 50 ms of quiet.
  IdleTrimmer trimmer(
      absl::Seconds(600),
      [&] {
        return Activity{calls.load(), open.load()};
      },
      [] { return true; }, absl::ZeroDuration(), NullLog(), absl::Milliseconds(50));
  ExpectOnceAfterEachQuiet(calls, open, [&] { return trimmer.releases(); });
  EXPECT_EQ(trimmer.trims(), 0u);
}

// A trimmer with 30 s waits, stopped 150 ms after it started: its destructor must not wait them
// out (it is woken by the stop). Not a timing assertion of the trimmer's speed: 20 s is only
// what a wait that ignores the stop would exceed.
void ExpectPromptStop(bool booted) {
  auto log =
      std::make_shared<spdlog::logger>("trim", std::make_shared<spdlog::sinks::null_sink_mt>());
  const auto start = std::chrono::steady_clock::now();
  {
    IdleTrimmer trimmer(
        absl::Seconds(30), [] { return Activity{}; }, [booted] { return booted; },
        absl::Seconds(30), log);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(trimmer.releases(), 0u);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(IdleTrimmerTest, StopsPromptlyWhileWaitingForBoot) { ExpectPromptStop(false); }

TEST(IdleTrimmerTest, StopsPromptlyWhileBootSettles) { ExpectPromptStop(true); }

}  // namespace
}  // namespace ktesio::daemon::memory
