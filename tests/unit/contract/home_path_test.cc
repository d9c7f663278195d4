// NormalizeHomeRelativePath: the lexical half of file-target confinement.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/home_path.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;

TEST(HomePathTest, Normalizes) {
  const std::pair<const char*, const char*> cases[] = {
      {"agent.toml", "agent.toml"},
      {"config/agent.toml", "config/agent.toml"},
      {"./config/./agent.toml", "config/agent.toml"},
      {"config//agent.toml", "config/agent.toml"},
      {"config/agent.toml/", "config/agent.toml"},
      {"a/b/../c.toml", "a/c.toml"},
      {"a/../b.toml", "b.toml"},
      {"config\\agent.toml", "config/agent.toml"},
      {"..a/b", "..a/b"},  // a segment merely starting with dots is a name
      {"a/...", "a/..."},
      {"a/c:d", "a/c:d"},
      {"config/config.toml", "config/config.toml"},  // only the home's own entries are taken
      {"logs.toml", "logs.toml"},
      {"memory-notes/x.toml", "memory-notes/x.toml"},
  };
  for (const auto& [input, expected] : cases) {
    absl::StatusOr<std::string> normalized = NormalizeHomeRelativePath(input);
    ASSERT_TRUE(IsOk(normalized)) << input;
    EXPECT_EQ(*normalized, expected) << input;
  }
}

TEST(HomePathTest, Rejects) {
  const std::pair<std::string, const char*> cases[] = {
      {"", "it is empty"},
      {"/etc/passwd", "it is absolute"},
      {"//server/share/x", "it is absolute"},
      {"\\\\server\\share\\x", "it is absolute"},
      {"\\x", "it is absolute"},
      {"C:\\x", "Windows drive"},
      {"c:x", "Windows drive"},
      {"C:", "Windows drive"},
      {"a:b", "Windows drive"},  // drive-relative on Windows
      {"..", "'..' leads out of it"},
      {"../x", "'..' leads out of it"},
      {"a/../../x", "'..' leads out of it"},
      {"a\\..\\..\\x", "'..' leads out of it"},
      {".", "names the home itself"},
      {"./", "names the home itself"},
      {"a/..", "names the home itself"},
      {std::string("a\0b", 3), "NUL byte"},
      {"config.toml", "'config.toml' is the engine's own"},
      {"./Config.TOML", "'config.toml' is the engine's own"},
      {"adapter.json", "'adapter.json' is the engine's own"},
      {"x/../effective-config.json", "'effective-config.json' is the engine's own"},
      {"logs/output-00000001.log", "'logs' is the engine's own"},
      {"run/exit", "'run' is the engine's own"},
      {"memory/notes.toml", "'memory' is the engine's own"},
  };
  for (const auto& [input, expected] : cases) {
    absl::StatusOr<std::string> normalized = NormalizeHomeRelativePath(input);
    EXPECT_TRUE(ManifestInvalid(normalized, expected)) << input;
    EXPECT_TRUE(ManifestInvalid(normalized, "must stay inside the Agent Home")) << input;
  }
}

TEST(HomePathTest, NormalizedFormIsAFixedPoint) {
  for (const char* input : {"a/./b/../c.toml", "x\\y\\z", "deep/er/still/f"}) {
    absl::StatusOr<std::string> once = NormalizeHomeRelativePath(input);
    ASSERT_TRUE(IsOk(once));
    absl::StatusOr<std::string> twice = NormalizeHomeRelativePath(*once);
    ASSERT_TRUE(IsOk(twice));
    EXPECT_EQ(*once, *twice);
  }
}

}  // namespace
}  // namespace ktesio::contract
