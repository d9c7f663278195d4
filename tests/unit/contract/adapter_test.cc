// The Adapter interface, the builtins and ValidateDeclaration.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/adapter.h"
#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/validation.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;
using testing::StatusIs;

TEST(BuiltinTest, KindsAreHermesAndMock) {
  EXPECT_EQ(BuiltinKinds(), (std::vector<std::string>{"hermes", "mock"}));
  for (const std::string& kind : BuiltinKinds()) {
    absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadBuiltinAdapter(kind);
    ASSERT_TRUE(IsOk(adapter)) << kind;
    EXPECT_TRUE((*adapter)->IsBuiltin());
    EXPECT_EQ((*adapter)->Declaration().kind, kind);
    EXPECT_EQ((*adapter)->Declaration().contract_version, "");  // builtins never negotiate
    EXPECT_TRUE(IsOk(ValidateDeclaration((*adapter)->Declaration()))) << kind;
  }
}

TEST(BuiltinTest, HermesDeclaration) {
  absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadBuiltinAdapter("hermes");
  ASSERT_TRUE(IsOk(adapter));
  const AdapterDeclaration& d = (*adapter)->Declaration();
  EXPECT_EQ(d.start.exec, "hermes");
  EXPECT_EQ(d.start.args, (std::vector<std::string>{"gateway", "run", "--external-supervisor"}));
  EXPECT_TRUE(d.start.env.empty());
  EXPECT_FALSE(d.stop.has_value());
  for (Os os : kAllOses) {
    EXPECT_EQ(d.capabilities.Project(Capability::kPause, os), SupportLevel::kBestEffort);
    EXPECT_EQ(d.capabilities.Project(Capability::kInteraction, os), SupportLevel::kGuaranteed);
  }
  EXPECT_EQ(d.metering, MeteringSource::kSelfReported);
  EXPECT_EQ(d.channel, InteractionChannel::kStdio);
  ASSERT_EQ(d.config.size(), 2u);
  EXPECT_EQ(d.config.at("memory.dir").kind, ConfigTarget::Kind::kEnv);
  EXPECT_EQ(d.config.at("memory.dir").env, "HERMES_HOME");
  EXPECT_EQ(d.config.at("model").env, "HERMES_MODEL");
}

TEST(BuiltinTest, MockDeclaration) {
  absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadBuiltinAdapter("mock");
  ASSERT_TRUE(IsOk(adapter));
  const AdapterDeclaration& d = (*adapter)->Declaration();
  EXPECT_EQ(d.start.exec, "ktesio-probe");
  EXPECT_EQ(d.start.args, (std::vector<std::string>{"--heartbeat-ms", "1000"}));
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kLinux), SupportLevel::kGuaranteed);
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kMacos), SupportLevel::kGuaranteed);
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kWindows), SupportLevel::kBestEffort);
  for (Os os : kAllOses) {
    EXPECT_EQ(d.capabilities.Project(Capability::kInteraction, os), SupportLevel::kGuaranteed);
  }
  EXPECT_EQ(d.metering, MeteringSource::kSelfReported);
  EXPECT_EQ(d.config.at("model").env, "MOCK_MODEL");
  EXPECT_EQ(d.config.at("memory.dir").env, "KTESIO_MEMORY_DIR");
}

TEST(BuiltinTest, BuiltinsDeliverThroughTheSameRenderer) {
  absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadBuiltinAdapter("hermes");
  ASSERT_TRUE(IsOk(adapter));
  RenderedDelivery d = RenderDelivery((*adapter)->Declaration(),
                                      {{"memory.dir", "/state/agents/h/memory"}, {"model", "m"}});
  EXPECT_EQ(d.env, (std::map<std::string, std::string>{{"HERMES_HOME", "/state/agents/h/memory"},
                                                       {"HERMES_MODEL", "m"}}));
}

TEST(BuiltinTest, UnknownKindNamesTheKnownKinds) {
  for (const char* kind : {"opencode", "", "Hermes", "mock "}) {
    absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadBuiltinAdapter(kind);
    EXPECT_TRUE(StatusIs(adapter, absl::StatusCode::kInvalidArgument, reason::kUnknownKind,
                         "(builtin kinds: hermes, mock"))
        << kind;
    EXPECT_TRUE(StatusIs(adapter, absl::StatusCode::kInvalidArgument, reason::kUnknownKind,
                         std::string("unknown adapter kind '") + kind + "'"));
  }
}

TEST(ManifestAdapterTest, LoadsThroughParseManifest) {
  absl::StatusOr<std::unique_ptr<Adapter>> adapter = LoadManifestAdapter(R"(
contract_version = "1.0.0"
[adapter]
kind = "echo"
[lifecycle.start]
exec = "cat"
[capabilities.interaction]
linux = "guaranteed"
[metering]
source = "self-reported"
)",
                                                                         "echo/adapter.toml");
  ASSERT_TRUE(IsOk(adapter));
  EXPECT_FALSE((*adapter)->IsBuiltin());
  EXPECT_EQ((*adapter)->Declaration().kind, "echo");
  EXPECT_EQ((*adapter)->Declaration().contract_version, "1.0.0");
}

TEST(ManifestAdapterTest, PropagatesParseErrors) {
  EXPECT_TRUE(ManifestInvalid(LoadManifestAdapter("", "a.toml"),
                              "a.toml: missing mandatory key 'contract_version'"));
  EXPECT_TRUE(StatusIs(LoadManifestAdapter("contract_version = \"2.0.0\"", "a.toml"),
                       absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible,
                       "manifest declares 2.0.0"));
}

AdapterDeclaration Valid() {
  AdapterDeclaration d;
  d.kind = "k";
  d.start.exec = "x";
  d.capabilities.Set(Capability::kPause, Os::kLinux, SupportLevel::kGuaranteed);
  return d;
}

TEST(ValidateDeclarationTest, AcceptsAValidDeclaration) {
  EXPECT_TRUE(IsOk(ValidateDeclaration(Valid())));
}

TEST(ValidateDeclarationTest, Rejections) {
  struct Case {
    const char* name;
    void (*mutate)(AdapterDeclaration&);
    const char* expected;
  };
  const Case cases[] = {
      {"empty kind", [](AdapterDeclaration& d) { d.kind = ""; }, "kind must not be empty"},
      {"empty exec", [](AdapterDeclaration& d) { d.start.exec = ""; },
       "[lifecycle.start] exec must not be empty"},
      {"nul exec", [](AdapterDeclaration& d) { d.start.exec = std::string("a\0b", 3); },
       "exec contains a NUL byte"},
      {"nul arg", [](AdapterDeclaration& d) { d.start.args = {std::string("\0", 1)}; },
       "args contain a NUL byte"},
      {"bad env name", [](AdapterDeclaration& d) { d.start.env["A=B"] = "1"; },
       "env entry 'A=B' is invalid"},
      {"stop empty exec", [](AdapterDeclaration& d) { d.stop = OpTemplate{}; },
       "[lifecycle.stop] exec must not be empty"},
      {"not viable",
       [](AdapterDeclaration& d) {
         d.capabilities.Set(Capability::kPause, Os::kLinux, SupportLevel::kUnsupported);
       },
       "not viable"},
      {"bad config key", [](AdapterDeclaration& d) { d.config["a b"] = ConfigTarget{}; },
       "config key 'a b' must be a dotted key"},
      {"bad env target",
       [](AdapterDeclaration& d) {
         ConfigTarget t;
         t.env = "1X";
         d.config["k"] = t;
       },
       "env target '1X' is not a valid variable name"},
      {"empty flag",
       [](AdapterDeclaration& d) {
         ConfigTarget t;
         t.kind = ConfigTarget::Kind::kFlag;
         d.config["k"] = t;
       },
       "flag target must be non-empty"},
      {"escaping file",
       [](AdapterDeclaration& d) {
         ConfigTarget t;
         t.kind = ConfigTarget::Kind::kFile;
         t.file_path = "../x";
         t.file_key = "k";
         d.config["k"] = t;
       },
       "'..' leads out of it"},
      {"unnormalized file",
       [](AdapterDeclaration& d) {
         ConfigTarget t;
         t.kind = ConfigTarget::Kind::kFile;
         t.file_path = "./x";
         t.file_key = "k";
         d.config["k"] = t;
       },
       "is not normalized (expected 'x')"},
      {"bad file key",
       [](AdapterDeclaration& d) {
         ConfigTarget t;
         t.kind = ConfigTarget::Kind::kFile;
         t.file_path = "x";
         t.file_key = "a..b";
         d.config["k"] = t;
       },
       "file key 'a..b'"},
  };
  for (const Case& c : cases) {
    AdapterDeclaration d = Valid();
    c.mutate(d);
    EXPECT_TRUE(ManifestInvalid(ValidateDeclaration(d), c.expected)) << c.name;
  }
}

TEST(ValidationTest, Names) {
  for (const char* ok : {"A", "_", "a_b", "HERMES_HOME", "x9"}) {
    EXPECT_TRUE(IsValidEnvVarName(ok)) << ok;
  }
  for (const char* bad : {"", "9A", "A-B", "A.B", "A B", "A=B", "\xc3\xa9"}) {
    EXPECT_FALSE(IsValidEnvVarName(bad)) << bad;
  }
  for (const char* ok : {"model", "memory.dir", "a.b-c.d_e", "0"}) {
    EXPECT_TRUE(IsValidDottedKey(ok)) << ok;
  }
  for (const char* bad : {"", ".", "a.", ".a", "a..b", "a b", "a/b", "\"a\""}) {
    EXPECT_FALSE(IsValidDottedKey(bad)) << bad;
  }
  EXPECT_TRUE(IsValidEnvOverrideName("ProgramFiles(x86)"));
  EXPECT_FALSE(IsValidEnvOverrideName(""));
  EXPECT_FALSE(IsValidEnvOverrideName("A=B"));
  EXPECT_FALSE(IsValidEnvOverrideName(std::string("A\0", 2)));
}

}  // namespace
}  // namespace ktesio::contract
