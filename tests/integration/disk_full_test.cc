// A full state disk, for real: the state dir is a small tmpfs mounted by the test (root only;
// skipped with the reason otherwise) holding the store, the agent's captured log and its usage
// copy. While it is full the daemon keeps answering, writes are refused with the reason, and the
// agent is held by backpressure (not dropped); when space returns, capture and ingestion resume
// with nothing lost and the store passes PRAGMA integrity_check.

#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon_harness.h"
#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {
namespace {

namespace fs = std::filesystem;

std::string IntegrityCheck(const std::string& path) {
  sqlite3* db = nullptr;
  std::string result = "unreadable";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return result;
}

// Fills the filesystem of `dir` with one file until a write fails with ENOSPC.
bool Fill(const std::string& file) {
  std::FILE* out = std::fopen(file.c_str(), "w");
  if (out == nullptr) {
    return false;
  }
  const std::string chunk(64 * 1024, 'f');
  while (std::fwrite(chunk.data(), 1, chunk.size(), out) == chunk.size() && std::fflush(out) == 0) {
  }
  const bool full = errno == ENOSPC;
  std::fclose(out);
  return full;
}

class Tmpfs {
 public:
  explicit Tmpfs(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=8m,mode=0700") == 0;
    error_ = mounted_ ? "" : std::strerror(errno);
  }
  ~Tmpfs() {
    if (mounted_) {
      umount2(dir_.c_str(), MNT_DETACH);
    }
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

TEST(DiskFull, DaemonAnswersRefusesWritesWithTheReasonAndLosesNothingWhenSpaceReturns) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to mount a small tmpfs as the state dir";
  }
  DaemonHarness daemon;
  Tmpfs tmpfs(daemon.state_dir());
  if (!tmpfs.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << tmpfs.error();
  }
  ASSERT_TRUE(daemon.Start()) << daemon.DaemonLog();
  const std::string dir = daemon.dir() + "/m";
  fs::create_directories(dir);
  constexpr int kLines = 150;
  WriteFileOrDie(dir + "/adapter.toml",
                 absl::StrCat("contract_version = \"1.0.0\"\n[adapter]\nkind = \"usage\"\n",
                              "[lifecycle.start]\nexec = \"", ProbePath(), "\"\n",
                              "args = [\"--heartbeat-ms\", \"10\", \"--usage-lines\", \"", kLines,
                              "\", \"--usage-input\", \"2\", \"--usage-output\", \"3\", ",
                              "\"--usage-interval-ms\", \"20\"]\n",
                              "[capabilities.pause]\nlinux = \"guaranteed\"\n",
                              "[metering]\nsource = \"self-reported\"\n"));
  ASSERT_EQ(daemon.Ctl({"agent", "register", "w", "--manifest", dir}).exit_code, 0);
  ASSERT_EQ(daemon.Ctl({"agent", "start", "w"}).exit_code, 0);
  auto usage = [&] {
    std::optional<Json> doc = ParseJson(daemon.Ctl({"agent", "usage", "w", "--json"}).out);
    return doc.has_value() ? (*doc)["usage"]["cumulative_input_tokens"].Int() : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return usage() > 0; }));

  // The disk fills up.
  const std::string filler = daemon.state_dir() + "/filler";
  ASSERT_TRUE(Fill(filler)) << "the tmpfs did not fill";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  RunResult status = daemon.Ctl({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(daemon.Ctl({"agent", "show", "w"}).exit_code, 0);
  RunResult refused = daemon.Ctl({"agent", "register", "x", "--kind", "mock"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(refused.err.find("full") != std::string::npos ||
              refused.err.find("No space") != std::string::npos)
      << refused.err;
  // The agent is held by backpressure, not dropped: it is still running.
  std::optional<Json> show = ParseJson(daemon.Ctl({"agent", "show", "w", "--json"}).out);
  ASSERT_TRUE(show.has_value());
  EXPECT_EQ((*show)["instance"]["state"].string, "running");

  // Space returns: capture and ingestion resume, nothing lost.
  fs::remove(filler);
  EXPECT_TRUE(WaitFor([&] { return usage() == 2 * kLines; }, std::chrono::seconds(30)))
      << "ledger input tokens " << usage() << " of " << 2 * kLines;
  ASSERT_EQ(daemon.Ctl({"agent", "register", "x", "--kind", "mock"}).exit_code, 0);
  // Every heartbeat the agent printed is in its log once, in order, without a gap.
  const std::string logs = daemon.Ctl({"agent", "logs", "w", "--tail", "100000"}).out;
  std::istringstream in(logs);
  int64_t expected = 1;
  int64_t seen = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("heartbeat ");
    if (at == std::string::npos) {
      continue;
    }
    std::istringstream fields(line.substr(at + 10));
    int64_t counter = 0;
    fields >> counter;
    EXPECT_EQ(counter, expected) << "a heartbeat line is missing or repeated";
    expected = counter + 1;
    ++seen;
  }
  EXPECT_GT(seen, 100);
  ASSERT_EQ(daemon.Ctl({"agent", "stop", "w", "--timeout", "0"}).exit_code, 0);
  ASSERT_EQ(daemon.Stop(), 0);
  EXPECT_EQ(IntegrityCheck(daemon.state_dir() + "/state.db"), "ok");
  const std::string log = daemon.DaemonLog();
  EXPECT_TRUE(log.find("full") != std::string::npos || log.find("No space") != std::string::npos)
      << "the daemon never said why writes failed";
}

}  // namespace
}  // namespace ktesio::testing
