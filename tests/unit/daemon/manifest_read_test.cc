// A RegisterAgent that names a manifest by path (no content) makes the daemon read a file a
// client chose: it must neither block on a FIFO nor read a device or a huge file into memory.

#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/manifest.h"
#include "process.h"
#include "registry/registry.h"

namespace ktesio::daemon::registry {
namespace {

class ManifestReadTest : public ::testing::Test {
 protected:
  ktesio::testing::TempDir temp_;
  const std::string& dir_ = temp_.path();
};

TEST_F(ManifestReadTest, ADirectoryMeansItsAdapterToml) {
  std::ofstream(dir_ + "/adapter.toml") << "contract_version = \"1.0.0\"\n";
  std::string resolved;
  absl::StatusOr<std::string> text = ReadManifestAt(dir_, &resolved);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "contract_version = \"1.0.0\"\n");
  EXPECT_EQ(resolved, dir_ + "/adapter.toml");
}

TEST_F(ManifestReadTest, AMissingFileIsNotFound) {
  absl::StatusOr<std::string> text = ReadManifestAt(dir_ + "/nope.toml", nullptr);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(contract::ErrorReason(text.status()), "MANIFEST_NOT_FOUND");
}

// With no writer, opening a FIFO for reading would block the daemon's thread for good.
TEST_F(ManifestReadTest, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/adapter.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> text = ReadManifestAt(dir_, nullptr);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(contract::ErrorReason(text.status()), "MANIFEST_INVALID");
  EXPECT_EQ(text.status().message(), fifo + " is not a regular file");
}

TEST_F(ManifestReadTest, ADeviceIsRefused) {
  absl::StatusOr<std::string> text = ReadManifestAt("/dev/zero", nullptr);
  EXPECT_EQ(contract::ErrorReason(text.status()), "MANIFEST_INVALID");
  EXPECT_EQ(text.status().message(), "/dev/zero is not a regular file");
}

TEST_F(ManifestReadTest, AFileOverTheLimitIsRefused) {
  const std::string path = dir_ + "/big.toml";
  std::ofstream(path) << std::string(contract::kMaxManifestBytes, '#');
  EXPECT_TRUE(ReadManifestAt(path, nullptr).ok()) << "exactly the limit is accepted";
  std::ofstream(path, std::ios::app) << "#";
  absl::StatusOr<std::string> text = ReadManifestAt(path, nullptr);
  EXPECT_EQ(contract::ErrorReason(text.status()), "MANIFEST_INVALID");
  EXPECT_EQ(text.status().message(), path + " is larger than 1048576 bytes");
}

}  // namespace
}  // namespace ktesio::daemon::registry
