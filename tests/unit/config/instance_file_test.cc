#include "config/instance_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing.h"

namespace ktesio::daemon::config {
namespace {

using testing::IsOk;
using testing::ReadAll;
using testing::StatusIs;
using testing::TempDir;
using testing::WriteAll;
namespace reason = contract::reason;

TEST(InstanceFileTest, MissingFileIsAnEmptyLayer) {
  TempDir home;
  absl::StatusOr<std::map<std::string, std::string>> layer = instance_file::Load(home.path());
  ASSERT_TRUE(IsOk(layer));
  EXPECT_TRUE(layer->empty());
}

TEST(InstanceFileTest, SetWritesNestedTypedTomlWithMode0600) {
  TempDir home;
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "restart.policy", "never")));
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "restart.max_consecutive", "007")));
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "autostart", "true")));
  absl::StatusOr<std::string> rate = instance_file::Set(home.path(), "cost.rate.input", "2.50");
  ASSERT_TRUE(IsOk(rate));
  EXPECT_EQ(*rate, "2.5");
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "agent.FOO", "say \"hi\"\n")));
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "model", "secret:MODEL")));
  const std::string path = instance_file::PathIn(home.path());
  EXPECT_EQ(testing::ModeOf(path), 0600u);
  const std::string text = ReadAll(path);
  EXPECT_NE(text.find("autostart = true\nmodel = \"secret:MODEL\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[agent]\nFOO = \"say \\\"hi\\\"\\n\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[cost.rate]\ninput = \"2.5\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[restart]\nmax_consecutive = 7\npolicy = \"never\"\n"), std::string::npos)
      << text;

  absl::StatusOr<std::map<std::string, std::string>> layer = instance_file::Load(home.path());
  ASSERT_TRUE(IsOk(layer));
  const std::map<std::string, std::string> want = {
      {"agent.FOO", "say \"hi\"\n"},    {"autostart", "true"},
      {"cost.rate.input", "2.5"},       {"model", "secret:MODEL"},
      {"restart.max_consecutive", "7"}, {"restart.policy", "never"},
  };
  EXPECT_EQ(*layer, want);
}

TEST(InstanceFileTest, SetReplacesAndUnsetRemoves) {
  TempDir home;
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "restart.policy", "never")));
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "restart.policy", "always")));
  EXPECT_EQ(instance_file::Load(home.path())->at("restart.policy"), "always");
  absl::StatusOr<bool> removed = instance_file::Unset(home.path(), "restart.policy");
  ASSERT_TRUE(IsOk(removed));
  EXPECT_TRUE(*removed);
  removed = instance_file::Unset(home.path(), "restart.policy");
  ASSERT_TRUE(IsOk(removed));
  EXPECT_FALSE(*removed);
  EXPECT_TRUE(instance_file::Load(home.path())->empty());
  EXPECT_TRUE(StatusIs(instance_file::Unset(home.path(), "restart.polcy"),
                       absl::StatusCode::kInvalidArgument, reason::kUnknownConfigKey,
                       "did you mean 'restart.policy'?"));
}

// Every kind of Set failure leaves the file byte-for-byte as it was.
TEST(InstanceFileTest, SetLeavesTheFileUnchangedOnEveryError) {
  TempDir home;
  const std::string path = instance_file::PathIn(home.path());
  const std::string original = "# hand-written\n[restart]\npolicy = \"never\"\n";
  struct Case {
    std::string key;
    std::string value;
    absl::StatusCode code;
    std::string_view reason;
  };
  const std::vector<Case> cases = {
      {"restart.polcy", "never", absl::StatusCode::kInvalidArgument, reason::kUnknownConfigKey},
      {"restart.policy", "sometimes", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid},
      {"logs.keep", "0", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid},
      {"cost.rate.input", "1e3", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid},
      {"memory.dir", "/x", absl::StatusCode::kPermissionDenied, reason::kConfigInvalid},
      {"metering.base_url", "http://x", absl::StatusCode::kPermissionDenied,
       reason::kConfigInvalid},
      {"agent.1BAD", "x", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid},
  };
  for (const Case& c : cases) {
    WriteAll(path, original);
    EXPECT_TRUE(StatusIs(instance_file::Set(home.path(), c.key, c.value), c.code, c.reason))
        << c.key;
    EXPECT_EQ(ReadAll(path), original) << c.key;
  }
  // The existing file is not valid TOML.
  const std::string broken = "[restart\npolicy = 1\n";
  WriteAll(path, broken);
  EXPECT_TRUE(StatusIs(instance_file::Set(home.path(), "model", "m"),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
                       "config.toml:1:"));
  EXPECT_EQ(ReadAll(path), broken);
  // The existing file holds a value the engine cannot rewrite.
  const std::string with_float = "x = 1.5\n";
  WriteAll(path, with_float);
  EXPECT_TRUE(StatusIs(instance_file::Set(home.path(), "model", "m"),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, "float"));
  EXPECT_EQ(ReadAll(path), with_float);
  // The write itself fails (read-only home; root ignores the mode, so skip that leg as root).
  WriteAll(path, original);
  ASSERT_EQ(chmod(home.path().c_str(), 0500), 0);
  if (geteuid() != 0) {
    EXPECT_TRUE(StatusIs(instance_file::Set(home.path(), "model", "m"), absl::StatusCode::kInternal,
                         reason::kIoError));
    EXPECT_EQ(ReadAll(path), original);
  }
  ASSERT_EQ(chmod(home.path().c_str(), 0700), 0);
}

TEST(InstanceFileTest, SetKeepsOtherHandEditedEntries) {
  TempDir home;
  WriteAll(instance_file::PathIn(home.path()), "unknown_key = \"kept\"\n[logs]\nkeep = 0\n");
  ASSERT_TRUE(IsOk(instance_file::Set(home.path(), "model", "m")));
  const std::string text = ReadAll(instance_file::PathIn(home.path()));
  EXPECT_NE(text.find("unknown_key = \"kept\""), std::string::npos) << text;
  EXPECT_NE(text.find("[logs]\nkeep = 0\n"), std::string::npos) << text;
  // The operator repairs the file key by key.
  EXPECT_TRUE(*instance_file::Unset(home.path(), "unknown_key"));
  EXPECT_TRUE(IsOk(instance_file::Set(home.path(), "logs.keep", "4")));
  EXPECT_TRUE(IsOk(instance_file::Load(home.path())));
}

// A hand edit may leave anything at config.toml: a FIFO must not block the daemon.
TEST(InstanceFileTest, LoadRefusesAFifoWithoutBlocking) {
  TempDir home;
  const std::string path = instance_file::PathIn(home.path());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  absl::StatusOr<std::map<std::string, std::string>> layer = instance_file::Load(home.path());
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("config.toml is not a regular file"),
            std::string_view::npos)
      << layer.status();
}

TEST(InstanceFileTest, LoadReportsPositionsAndRules) {
  TempDir home;
  const std::string path = instance_file::PathIn(home.path());
  struct Case {
    std::string text;
    absl::StatusCode code;
    std::string_view reason;
    std::string substring;
  };
  const std::vector<Case> cases = {
      {"model = \n", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, "config.toml:1:"},
      {"[restart]\npolicy = \"sometimes\"\n", absl::StatusCode::kInvalidArgument,
       reason::kConfigInvalid, "config.toml:2:10: 'restart.policy' must be one of"},
      {"[restart]\nmax_consecutive = \"5\"\n", absl::StatusCode::kInvalidArgument,
       reason::kConfigInvalid, "'restart.max_consecutive' must be an integer, got a string"},
      {"autostart = \"true\"\n", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
       "must be a boolean"},
      {"model = 3\n", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
       "must be a string, got an integer"},
      {"cost.rate.input = 2.5\n", absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
       "got a float"},
      {"[restart]\nmax_consecutive = -1\n", absl::StatusCode::kInvalidArgument,
       reason::kConfigInvalid, "digits only"},
      {"[restart]\npolcy = \"never\"\n", absl::StatusCode::kInvalidArgument,
       reason::kUnknownConfigKey, "config.toml:2:9: unknown config key 'restart.polcy'"},
      {"[memory]\ndir = \"/x\"\n", absl::StatusCode::kPermissionDenied, reason::kConfigInvalid,
       "the engine owns it"},
      {"\"restart.policy\" = \"never\"\n[restart]\npolicy = \"always\"\n",
       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, "defined twice"},
  };
  for (const Case& c : cases) {
    WriteAll(path, c.text);
    EXPECT_TRUE(StatusIs(instance_file::Load(home.path()), c.code, c.reason, c.substring))
        << c.text;
  }
}

TEST(InstanceFileTest, LoadAcceptsDottedAndQuotedSpellings) {
  TempDir home;
  WriteAll(instance_file::PathIn(home.path()),
           "restart.policy = \"never\"\n\"logs.keep\" = 4\n[agent]\nX = \"y\"\n");
  absl::StatusOr<std::map<std::string, std::string>> layer = instance_file::Load(home.path());
  ASSERT_TRUE(IsOk(layer));
  const std::map<std::string, std::string> want = {
      {"agent.X", "y"}, {"logs.keep", "4"}, {"restart.policy", "never"}};
  EXPECT_EQ(*layer, want);
}

TEST(InstanceFileTest, SetInMissingHomeFails) {
  TempDir root;
  EXPECT_TRUE(StatusIs(instance_file::Set(root.File("absent"), "model", "m"),
                       absl::StatusCode::kNotFound, reason::kIoError));
}

}  // namespace
}  // namespace ktesio::daemon::config
