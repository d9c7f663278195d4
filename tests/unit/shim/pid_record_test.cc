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
  ASSERT_EQ(WritePidRecord(path, 12345), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "12345     \n");
  const ino_t inode = InodeOf(path);
  ASSERT_NE(inode, 0U);

  ASSERT_EQ(WritePidRecord(path, 7), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "7         \n");
  ASSERT_EQ(WritePidRecord(path, 2147483647), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "2147483647\n");
  ASSERT_EQ(ClearPidRecord(path), 0);  // cleared: blank, never "0"
  EXPECT_EQ(ReadFile(path).value_or(""), "          \n");
  EXPECT_EQ(InodeOf(path), inode);
}

TEST(PidRecord, ClearingARecordThatIsNotThereCreatesNothing) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kAgentPidFile;
  EXPECT_EQ(ClearPidRecord(path), 0);
  EXPECT_FALSE(ReadFile(path).has_value());
}

TEST(PidRecord, CutsALongerRecordOfAnotherFormat) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kAgentPidFile;
  std::ofstream(path) << "123456789012345678901234567890\n";
  ASSERT_EQ(WritePidRecord(path, 42), 0);
  EXPECT_EQ(ReadFile(path).value_or(""), "42        \n");
}

TEST(PidRecord, WritesIntoNothingButARegularFile) {
  TempDir dir;
  // A FIFO without a reader: refused at once (never a blocking open), and left a FIFO.
  const std::string fifo = dir.run_dir() + "/fifo.pid";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(WritePidRecord(fifo, 42), ENXIO);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  struct stat info {};
  ASSERT_EQ(lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));

  // A FIFO that has a reader opens, and is still refused (fstat): nothing is written into it.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(WritePidRecord(fifo, 42), EINVAL);
  char byte = 0;
  EXPECT_EQ(read(reader, &byte, 1), 0);  // empty, and no writer left open
  close(reader);

  // A directory in the record's place.
  const std::string directory = dir.run_dir() + "/dir.pid";
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  EXPECT_EQ(WritePidRecord(directory, 42), EISDIR);

  // A symlink is not followed: its target keeps its content.
  const std::string target = dir.File("target");
  std::ofstream(target) << "keep\n";
  const std::string link = dir.run_dir() + "/link.pid";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(WritePidRecord(link, 42), ELOOP);
  EXPECT_EQ(ReadFile(target).value_or(""), "keep\n");
}

TEST(PidRecord, ReadsThePidOrNone) {
  TempDir dir;
  const std::string path = dir.run_dir() + "/" + kShimPidFile;
  EXPECT_EQ(ReadPidRecord(path), 0);  // missing
  ASSERT_EQ(WritePidRecord(path, 12345), 0);
  EXPECT_EQ(ReadPidRecord(path), 12345);
  ASSERT_EQ(ClearPidRecord(path), 0);
  EXPECT_EQ(ReadPidRecord(path), 0);               // blank
  for (const char* text : {"12345\n", "12345"}) {  // the format before records were padded
    std::ofstream(path, std::ios::trunc) << text;
    EXPECT_EQ(ReadPidRecord(path), 12345) << text;
  }
  for (const char* text : {"0\n", "1\n", "-5\n", "12x\n", "99999999999999999999\n", "\n"}) {
    std::ofstream(path, std::ios::trunc) << text;
    EXPECT_EQ(ReadPidRecord(path), 0) << text;
  }
}

TEST(PidRecord, ClearingRemovesWhatCannotBeRewritten) {
  TempDir dir;
  const std::string fifo = dir.run_dir() + "/" + kAgentPidFile;
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ClearPidRecord(fifo), 0);
  struct stat info {};
  EXPECT_NE(lstat(fifo.c_str(), &info), 0);  // gone, never opened for writing
  const std::string directory = dir.run_dir() + "/" + kShimPidFile;
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  EXPECT_EQ(ClearPidRecord(directory), EISDIR);  // neither rewritten nor removable: said so
}

}  // namespace
}  // namespace ktesio::daemon::shim::testing
