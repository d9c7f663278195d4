#include "paths/paths.h"

#include <map>

#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "status_assertions.h"

namespace ktesio::daemon {
namespace {

class FakeEnv : public Environment {
 public:
  explicit FakeEnv(std::initializer_list<std::pair<const std::string, std::string>> vars)
      : vars_(vars) {}
  std::string Get(std::string_view name) const override {
    auto it = vars_.find(std::string(name));
    return it == vars_.end() ? "" : it->second;
  }

 private:
  std::map<std::string, std::string> vars_;
};

TEST(Paths, UserModeDefaultsFollowXdg) {
  FakeEnv env({{"HOME", "/home/u"}, {"XDG_RUNTIME_DIR", "/run/user/1000"}});
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths({}, env);
  KT_ASSERT_OK(paths.status());
  EXPECT_EQ(paths->state_dir, "/home/u/.local/share/ktesio");
  EXPECT_EQ(paths->socket_path, "/run/user/1000/ktesio/ktesiod.sock");
  EXPECT_EQ(paths->config_path, "/home/u/.local/share/ktesio/ktesiod.toml");
  EXPECT_FALSE(paths->system_mode);
}

TEST(Paths, UserModeWithoutRuntimeDirPutsSocketInStateDir) {
  FakeEnv env({{"HOME", "/home/u"}, {"XDG_DATA_HOME", "/data"}});
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths({}, env);
  KT_ASSERT_OK(paths.status());
  EXPECT_EQ(paths->state_dir, "/data/ktesio");
  EXPECT_EQ(paths->socket_path, "/data/ktesio/ktesiod.sock");
}

TEST(Paths, SystemModeDefaults) {
  FakeEnv env({{"HOME", "/root"}});
  PathOverrides overrides;
  overrides.system_mode = true;
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths(overrides, env);
  KT_ASSERT_OK(paths.status());
  EXPECT_EQ(paths->state_dir, "/var/lib/ktesio");
  EXPECT_EQ(paths->socket_path, "/run/ktesio/ktesiod.sock");
  EXPECT_EQ(paths->config_path, "/etc/ktesio/ktesiod.toml");
}

TEST(Paths, FlagsBeatEnvironmentBeatDefaults) {
  FakeEnv env({{"HOME", "/h"}, {"KTESIO_STATE_DIR", "/env/state"}, {"KTESIO_SOCKET", "/env.sock"}});
  absl::StatusOr<DaemonPaths> from_env = ResolveDaemonPaths({}, env);
  KT_ASSERT_OK(from_env.status());
  EXPECT_EQ(from_env->state_dir, "/env/state");
  EXPECT_EQ(from_env->socket_path, "/env.sock");
  PathOverrides overrides;
  overrides.state_dir = "/flag/state/";
  overrides.socket_path = "/flag.sock";
  absl::StatusOr<DaemonPaths> from_flags = ResolveDaemonPaths(overrides, env);
  KT_ASSERT_OK(from_flags.status());
  EXPECT_EQ(from_flags->state_dir, "/flag/state");  // trailing slash trimmed
  EXPECT_EQ(from_flags->socket_path, "/flag.sock");
}

TEST(Paths, RelativeStateDirRejected) {
  FakeEnv env({{"KTESIO_STATE_DIR", "relative"}});
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths({}, env);
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Paths, NoHomeIsAClearError) {
  FakeEnv env({});
  absl::StatusOr<DaemonPaths> paths = ResolveDaemonPaths({}, env);
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Message(paths.status()).find("--state-dir"), std::string::npos);
}

TEST(Paths, SocketLengthLimit) {
  KT_EXPECT_OK(ValidateSocketPath(std::string(107, 'a')));
  absl::Status too_long = ValidateSocketPath(std::string(108, 'a'));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(testing::Message(too_long).find("108 bytes"), std::string::npos);
  EXPECT_FALSE(ValidateSocketPath("").ok());
}

TEST(Names, Table) {
  struct Case {
    std::string name;
    bool valid;
  };
  const Case cases[] = {
      {"a", true},
      {"0", true},
      {"agent-1", true},
      {"a_b", true},
      {"a-", true},
      {std::string(128, 'z'), true},
      {"", false},
      {"-a", false},
      {"_a", false},
      {"A", false},
      {"a.b", false},
      {"a/b", false},
      {"..", false},
      {"a b", false},
      {std::string(129, 'z'), false},
      {"\xc3\xa9", false},
      {std::string("a\0b", 3), false},
  };
  for (const Case& c : cases) {
    absl::Status status = ValidateInstanceName(c.name);
    EXPECT_EQ(status.ok(), c.valid) << "'" << c.name << "': " << status;
    if (!c.valid) {
      EXPECT_EQ(contract::ErrorReason(status), "INVALID_NAME");
    }
  }
  // The message quotes the client's name escaped and bounded: no terminal sequence, no line
  // break, not megabytes.
  const absl::Status escaped = ValidateInstanceName("a\x1b[31mRED\nb");
  EXPECT_NE(escaped.message().find("invalid instance name 'a\\x1b[31mRED\\nb'"),
            absl::string_view::npos)
      << escaped;
  const absl::Status huge = ValidateInstanceName(std::string(3000000, 'n'));
  EXPECT_LT(huge.message().size(), 400u);
  EXPECT_NE(huge.message().find("... (3000000 bytes)"), absl::string_view::npos);
}

}  // namespace
}  // namespace ktesio::daemon
