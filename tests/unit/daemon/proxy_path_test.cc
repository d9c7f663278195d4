#include "engine/proxy_path.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "fs/fs.h"
#include "gtest/gtest.h"
#include "status_assertions.h"

namespace ktesio::daemon::engine {
namespace {

// The prefix is part of every running agent's proxy URL, so it must never change across
// versions: these values were computed with Python's hmac module (HMAC-SHA256, first 16 bytes in
// hex) over "NAME\0REGISTERED_AT_MS".
TEST(ProxyPath, PrefixIsTheHmacSha256OfNameAndRegistrationTime) {
  EXPECT_EQ(ProxyPathPrefix("0123456789abcdef0123456789abcdef", "coder-1", 1764000000123),
            "/kt-e2ab884a0ee9a6c72f4fc97090e5fa21");
}

TEST(ProxyPath, KeysLongerThanABlockAreHashedFirst) {
  std::string key;
  for (int i = 0; i < 100; ++i) {
    key.push_back(static_cast<char>(i));
  }
  EXPECT_EQ(ProxyPathPrefix(key, "a", 0), "/kt-4971e37a794944da01ff346352492ff6");
}

TEST(ProxyPath, DifferentNamesOrTimesGiveDifferentPrefixes) {
  const std::string key(32, 'k');
  EXPECT_NE(ProxyPathPrefix(key, "a", 1), ProxyPathPrefix(key, "b", 1));
  EXPECT_NE(ProxyPathPrefix(key, "a", 1), ProxyPathPrefix(key, "a", 2));
}

TEST(ProxyPath, KeyIsMadeOnceThenReadBack) {
  char dir_template[] = "/tmp/kt-proxy-key-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  absl::StatusOr<ProxyKey> made = LoadProxyKey(dir);
  KT_ASSERT_OK(made.status());
  EXPECT_TRUE(made->created_now);
  EXPECT_EQ(made->key.size(), 32u);
  EXPECT_NE(made->key, std::string(32, '\0'));
  struct stat info {};
  ASSERT_EQ(stat((dir + "/proxy.key").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  absl::StatusOr<ProxyKey> again = LoadProxyKey(dir);
  KT_ASSERT_OK(again.status());
  EXPECT_FALSE(again->created_now);
  EXPECT_EQ(again->key, made->key);
  // A second directory gets a different key.
  char other_template[] = "/tmp/kt-proxy-key-XXXXXX";
  ASSERT_NE(mkdtemp(other_template), nullptr);
  absl::StatusOr<ProxyKey> other = LoadProxyKey(other_template);
  KT_ASSERT_OK(other.status());
  EXPECT_NE(other->key, made->key);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other_template);
}

TEST(ProxyPath, AKeyFileOfTheWrongSizeIsRefused) {
  char dir_template[] = "/tmp/kt-proxy-key-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  KT_ASSERT_OK(fs::WriteFileAtomic(dir + "/proxy.key", "short", 0600));
  absl::StatusOr<ProxyKey> loaded = LoadProxyKey(dir);
  EXPECT_FALSE(loaded.ok());
  EXPECT_NE(std::string(loaded.status().message()).find("holds 5 bytes, not 32"), std::string::npos)
      << loaded.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ktesio::daemon::engine
