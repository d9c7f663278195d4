#include "config/secrets.h"

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

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

TEST(SecretsTest, SetListRemoveRoundTrip) {
  TempDir state;
  SecretsStore store(state.path());
  EXPECT_EQ(store.path(), state.File("secrets.toml"));
  absl::StatusOr<std::vector<std::string>> names = store.List();
  ASSERT_TRUE(IsOk(names));
  EXPECT_TRUE(names->empty());

  absl::StatusOr<bool> replaced = store.Set("openai.key-1", "sk-1");
  ASSERT_TRUE(IsOk(replaced));
  EXPECT_FALSE(*replaced);
  replaced = store.Set("openai.key-1", "sk-2");
  ASSERT_TRUE(IsOk(replaced));
  EXPECT_TRUE(*replaced);
  ASSERT_TRUE(IsOk(store.Set("B", "line1\nline2 \"q\" \\")));
  ASSERT_TRUE(IsOk(store.Set("A_bin", std::string("\xff\x01\xfe", 3))));
  EXPECT_EQ(testing::ModeOf(store.path()), 0600u);

  names = store.List();
  ASSERT_TRUE(IsOk(names));
  EXPECT_EQ(*names, (std::vector<std::string>{"A_bin", "B", "openai.key-1"}));
  const EnvLookup no_env = FakeEnv({});
  EXPECT_EQ(*store.Resolve("openai.key-1", no_env), "sk-2");
  EXPECT_EQ(*store.Resolve("B", no_env), "line1\nline2 \"q\" \\");
  EXPECT_EQ(*store.Resolve("A_bin", no_env), std::string("\xff\x01\xfe", 3));
  EXPECT_NE(ReadAll(store.path()).find("[A_bin]\nbase64 = \"/wH+\"\n"), std::string::npos)
      << ReadAll(store.path());

  EXPECT_TRUE(IsOk(store.Remove("B")));
  EXPECT_TRUE(StatusIs(store.Remove("B"), absl::StatusCode::kNotFound, reason::kNotFound,
                       "no secret named 'B'"));
  EXPECT_EQ(*store.List(), (std::vector<std::string>{"A_bin", "openai.key-1"}));
}

TEST(SecretsTest, RejectsBadNamesAndValues) {
  TempDir state;
  SecretsStore store(state.path());
  for (const std::string& name : {std::string(""), std::string("a b"), std::string("a/b"),
                                  std::string(129, 'x'), std::string("é")}) {
    EXPECT_TRUE(StatusIs(store.Set(name, "v"), absl::StatusCode::kInvalidArgument,
                         reason::kConfigInvalid, "invalid secret name"))
        << name;
  }
  EXPECT_TRUE(StatusIs(store.Set("N", std::string("a\0b", 3)), absl::StatusCode::kInvalidArgument,
                       reason::kConfigInvalid, "NUL"));
  EXPECT_TRUE(StatusIs(store.Set("N", std::string(64 * 1024 + 1, 'x')),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, "longer than"));
  EXPECT_TRUE(StatusIs(store.Set("N", ""), absl::StatusCode::kInvalidArgument,
                       reason::kConfigInvalid, "empty"));
  EXPECT_TRUE(IsOk(store.Set("N", std::string(64 * 1024, 'x'))));
  EXPECT_TRUE(IsOk(store.Set(std::string(128, 'x'), "v")));
}

TEST(SecretsTest, RefusesAFileReadableByOthers) {
  TempDir state;
  SecretsStore store(state.path());
  ASSERT_TRUE(IsOk(store.Set("K", "v")));
  const std::string before = ReadAll(store.path());
  for (mode_t mode : {0644, 0640, 0604, 0660, 0602}) {
    ASSERT_EQ(chmod(store.path().c_str(), mode), 0);
    char text[8];
    std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode));
    EXPECT_TRUE(StatusIs(store.Resolve("K", FakeEnv({{"K", "env"}})),
                         absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
                         std::string("its mode is ") + text))
        << text;
    EXPECT_TRUE(StatusIs(store.List(), absl::StatusCode::kPermissionDenied,
                         reason::kPermissionDenied, "chmod 600"));
    EXPECT_TRUE(StatusIs(store.Set("K2", "v"), absl::StatusCode::kPermissionDenied,
                         reason::kPermissionDenied));
    EXPECT_EQ(ReadAll(store.path()), before);
  }
  ASSERT_EQ(chmod(store.path().c_str(), 0600), 0);
  EXPECT_TRUE(IsOk(store.List()));
  ASSERT_EQ(chmod(store.path().c_str(), 0400), 0);
  EXPECT_TRUE(IsOk(store.List()));
}

TEST(SecretsTest, RefusesASymlink) {
  TempDir state;
  const std::string target = state.File("elsewhere.toml");
  WriteAll(target, "\"K\" = \"v\"\n");
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  ASSERT_EQ(symlink(target.c_str(), state.File("secrets.toml").c_str()), 0);
  SecretsStore store(state.path());
  EXPECT_TRUE(StatusIs(store.List(), absl::StatusCode::kPermissionDenied, reason::kPermissionDenied,
                       "symbolic link"));
}

TEST(SecretsTest, ReadsHandWrittenFormsAndReportsMalformedOnes) {
  TempDir state;
  SecretsStore store(state.path());
  WriteAll(store.path(), "\"a.b\" = \"x\"\nK = { base64 = \"/wH+\" }\n");
  ASSERT_EQ(chmod(store.path().c_str(), 0600), 0);
  EXPECT_EQ(*store.Resolve("K", FakeEnv({})), std::string("\xff\x01\xfe", 3));
  EXPECT_EQ(*store.Resolve("a.b", FakeEnv({})), "x");
  for (const char* text : {"\"K\" = \n", "K = 1\n", "[a.b]\nc = \"x\"\n",
                           "K = { base64 = \"!!\" }\n", "K = \"a\\u0000b\"\n"}) {
    WriteAll(store.path(), text);
    ASSERT_EQ(chmod(store.path().c_str(), 0600), 0);
    EXPECT_TRUE(StatusIs(store.List(), absl::StatusCode::kInvalidArgument, reason::kConfigInvalid,
                         "secrets.toml:"))
        << text;
  }
}

TEST(SecretsTest, ResolveOrderStoreThenEnvironment) {
  TempDir state;
  SecretsStore store(state.path());
  ASSERT_TRUE(IsOk(store.Set("BOTH", "from-store")));
  const EnvLookup env = FakeEnv({{"BOTH", "from-env"}, {"ENV_ONLY", "env-value"}, {"EMPTY", ""}});
  EXPECT_EQ(*store.Resolve("BOTH", env), "from-store");
  EXPECT_EQ(*store.Resolve("ENV_ONLY", env), "env-value");
  EXPECT_TRUE(StatusIs(store.Resolve("MISSING", env), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED",
                       "secret 'MISSING' is not resolvable: tried the secrets store (" +
                           store.path() + ") and the daemon environment variable MISSING"));
  EXPECT_TRUE(StatusIs(store.Resolve("EMPTY", env), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED", "'EMPTY'"));
  EXPECT_TRUE(StatusIs(store.Resolve("bad name", env), absl::StatusCode::kInvalidArgument,
                       reason::kConfigInvalid));
}

TEST(SecretsTest, ProcessEnvironmentReadsGetenv) {
  ASSERT_EQ(setenv("KTESIO_CONFIG_TEST_VAR", "v1", 1), 0);
  EnvLookup env = ProcessEnvironment();
  EXPECT_EQ(env("KTESIO_CONFIG_TEST_VAR"), "v1");
  EXPECT_FALSE(env("KTESIO_CONFIG_TEST_UNSET_VAR").has_value());
  unsetenv("KTESIO_CONFIG_TEST_VAR");
}

}  // namespace
}  // namespace ktesio::daemon::config
