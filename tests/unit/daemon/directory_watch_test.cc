// fs::DirectoryWatch over a real directory and the real inotify: a watch of the whole directory
// fires for any file written there, a watch of one file only for that file.

#include "fs/directory_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "boost/asio/io_context.hpp"

namespace ktesio::daemon::fs {
namespace {

class DirectoryWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (std::filesystem::temp_directory_path() / "watch-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::app) << text;
  }
  // Runs the loop until it has nothing to do for a while (inotify delivers within microseconds).
  // Events queued before it are read in one batch, so each watch is called at most once.
  void Settle() {
    io_.restart();
    while (io_.run_one_for(std::chrono::milliseconds(200)) > 0) {
    }
  }

  boost::asio::io_context io_;
  std::string dir_;
};

TEST_F(DirectoryWatchTest, AWatchOfOneFileFiresOnlyForThatFile) {
  int everything = 0;
  int wanted = 0;
  DirectoryWatch all(io_, dir_, [&] { ++everything; });
  DirectoryWatch one(io_, dir_, "usage-3.log", [&] { ++wanted; });
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(one.ok());

  Write("shim.pid", "12345     \n");
  Write("usage-2.log", "another run's file\n");
  Write("usage-3.log.tmp", "a name that only starts the same\n");
  Settle();
  EXPECT_EQ(everything, 1);
  EXPECT_EQ(wanted, 0);

  everything = 0;
  Write("usage-3.log", "line\n");
  Settle();
  EXPECT_EQ(everything, 1);
  EXPECT_EQ(wanted, 1);

  // Moved in under its name (a temporary renamed over it) counts too.
  wanted = 0;
  Write("staged", "record\n");
  Settle();
  EXPECT_EQ(wanted, 0);
  std::filesystem::rename(dir_ + "/staged", dir_ + "/usage-3.log");
  Settle();
  EXPECT_EQ(wanted, 1);
}

TEST_F(DirectoryWatchTest, RemovingOneOfTwoWatchesOfADirectoryKeepsTheOther) {
  int kept = 0;
  DirectoryWatch stays(io_, dir_, "respawned", [&] { ++kept; });
  {
    int gone = 0;
    DirectoryWatch removed(io_, dir_, [&] { ++gone; });
    ASSERT_TRUE(removed.ok());
  }
  Write("respawned", "record\n");
  Settle();
  EXPECT_EQ(kept, 1);
}

TEST_F(DirectoryWatchTest, AWatchFiresOnlyForItsOwnDirectory) {
  const std::string other = dir_ + "/other";
  std::filesystem::create_directory(other);
  int here = 0;
  int there = 0;
  DirectoryWatch watch_here(io_, dir_, "record", [&] { ++here; });
  DirectoryWatch watch_there(io_, other, "record", [&] { ++there; });
  std::ofstream(other + "/record") << "x\n";
  Settle();
  EXPECT_EQ(here, 0);
  EXPECT_EQ(there, 1);
}

TEST_F(DirectoryWatchTest, AMissingDirectoryCannotBeWatched) {
  DirectoryWatch missing(io_, dir_ + "/absent", "file", [] {});
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace ktesio::daemon::fs
