// The run dir's pid records (shim/pid_record.h): one fixed-width line, rewritten in place.

#include "pid_record.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "shim_test_util.h"

namespace ktesio::daemon::shim::testing {
namespace {

ino_t InodeOf(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

TEST(PidRecord, IsOneFixedWidthLineRewrittenInTheSameInode) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kShimPidFile;
  ASSERT_EQ(WritePidRecord(path, 12345, /*create=*/true), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "12345     \n");
  const ino_t inode = InodeOf(path);
  ASSERT_NE(inode, 0U);

  ASSERT_EQ(WritePidRecord(path, 7, /*create=*/true), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "7         \n");
  ASSERT_EQ(WritePidRecord(path, 2147483647, /*create=*/false), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "2147483647\n");
  ASSERT_EQ(WritePidRecord(path, 0, /*create=*/false), 0);  // cleared: blank, never "0"
  EXPECT_EQ(ReadFile(path).value_or(""), "          \n");
  EXPECT_EQ(InodeOf(path), inode);
}

TEST(PidRecord, ClearingARecordThatIsNotThereCreatesNothing) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kAgentPidFile;
  EXPECT_EQ(WritePidRecord(path, 0, /*create=*/false), 0);
  EXPECT_FALSE(ReadFile(path).has_value());
}

TEST(PidRecord, CutsALongerRecordOfAnotherFormat) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kAgentPidFile;
  std::ofstream(path) << "123456789012345678901234567890\n";
  ASSERT_EQ(WritePidRecord(path, 42, /*create=*/false), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "42        \n");
}

TEST(PidRecord, WritesIntoNothingButARegularFile) {
  TempDir dir;
  // A FIFO without a reader: refused at once (never a blocking open), and left a FIFO.
  const std::string fifo = dir.run_dir() + "/fifo.pid";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(WritePidRecord(fifo, 42, /*create=*/true), ENXIO);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  struct stat info {};
  ASSERT_EQ(lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));

  // A FIFO that has a reader opens, and is still refused (fstat): nothing is written into it.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(WritePidRecord(fifo, 42, /*create=*/true), EINVAL);
  char byte = 0;
  EXPECT_EQ(read(reader, &byte, 1), 0);  // empty, and no writer left open
  close(reader);

  // A directory in the record's place.
  const std::string directory = dir.run_dir() + "/dir.pid";
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  EXPECT_EQ(WritePidRecord(directory, 42, /*create=*/true), EISDIR);

  // A symlink is not followed: its target keeps its content.
  const std::string target = dir.File("target");
  std::ofstream(target) << "keep\n";
  const std::string link = dir.run_dir() + "/link.pid";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(WritePidRecord(link, 42, /*create=*/true), ELOOP);
  EXPECT_EQ(ReadFile(target).value_or(""), "keep\n");
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
