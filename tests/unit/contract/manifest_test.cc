// ParseManifest: the seed's complete example, the mandatory-section order, unknown keys, types,
// capabilities, metering, interaction, lifecycle templates and error positions.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/manifest.h"
#include "manifests.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;
using testing::Message;
using testing::StatusIs;

// The "Complete Example" of the adapter.toml reference, verbatim.
constexpr char kSeedExample[] = R"(contract_version = "1.0.0"

[adapter]
kind = "my-agent"
name = "My Agent"

[lifecycle.start]
exec = "my-agent"
args = ["--serve"]
env = { LOG_LEVEL = "info" }

[lifecycle.stop]
exec = "my-agent"
args = ["--shutdown"]

[capabilities.pause]
linux = "guaranteed"
macos = "guaranteed"
windows = "best-effort"

[capabilities.interaction]
linux = "guaranteed"
macos = "guaranteed"
windows = "guaranteed"

[metering]
source = "self-reported"

[interaction]
channel = "stdio"

[config.model]
env = "MODEL"
)";

using ::ktesio::testing::kMinimalManifest;

absl::StatusOr<AdapterDeclaration> Parse(std::string_view text) {
  return ParseManifest(text, "adapter.toml");
}

std::string With(std::string_view extra) {
  return std::string(kMinimalManifest) + std::string(extra);
}

// kMinimalManifest with `extra` inserted as line 2, i.e. at top level before the first table.
std::string WithTopLevel(std::string_view extra) {
  std::string manifest = kMinimalManifest;
  manifest.insert(manifest.find('\n') + 1, extra);
  return manifest;
}

TEST(ManifestTest, SeedCompleteExampleParsesEveryField) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(kSeedExample);
  ASSERT_TRUE(IsOk(parsed));
  const AdapterDeclaration& d = *parsed;
  EXPECT_EQ(d.contract_version, "1.0.0");
  EXPECT_EQ(d.kind, "my-agent");
  EXPECT_EQ(d.display_name, "My Agent");
  EXPECT_EQ(d.start.exec, "my-agent");
  EXPECT_EQ(d.start.args, std::vector<std::string>{"--serve"});
  EXPECT_EQ(d.start.env, (std::map<std::string, std::string>{{"LOG_LEVEL", "info"}}));
  ASSERT_TRUE(d.stop.has_value());
  EXPECT_EQ(d.stop->exec, "my-agent");
  EXPECT_EQ(d.stop->args, std::vector<std::string>{"--shutdown"});
  EXPECT_TRUE(d.stop->env.empty());
  EXPECT_FALSE(d.pause.has_value());
  EXPECT_FALSE(d.resume.has_value());
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kLinux), SupportLevel::kGuaranteed);
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kMacos), SupportLevel::kGuaranteed);
  EXPECT_EQ(d.capabilities.Project(Capability::kPause, Os::kWindows), SupportLevel::kBestEffort);
  for (Os os : kAllOses) {
    EXPECT_EQ(d.capabilities.Project(Capability::kInteraction, os), SupportLevel::kGuaranteed);
    EXPECT_TRUE(d.capabilities.HasEntry(Capability::kInteraction, os));
  }
  EXPECT_EQ(d.metering, MeteringSource::kSelfReported);
  EXPECT_EQ(d.channel, InteractionChannel::kStdio);
  ASSERT_EQ(d.config.size(), 1u);
  const ConfigTarget& model = d.config.at("model");
  EXPECT_EQ(model.kind, ConfigTarget::Kind::kEnv);
  EXPECT_EQ(model.env, "MODEL");
}

TEST(ManifestTest, MinimalManifestDefaults) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(kMinimalManifest);
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->display_name, "");
  EXPECT_TRUE(parsed->start.args.empty());
  EXPECT_TRUE(parsed->start.env.empty());
  EXPECT_FALSE(parsed->stop.has_value());  // omitted stop: process termination IS the stop
  EXPECT_EQ(parsed->channel, InteractionChannel::kStdio);  // omitted [interaction] => stdio
  EXPECT_TRUE(parsed->config.empty());
  EXPECT_EQ(parsed->capabilities.Project(Capability::kInteraction, Os::kLinux),
            SupportLevel::kUnsupported);
}

TEST(ManifestTest, AllLifecycleOpsAndEnvTables) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "/opt/agent/bin/agent"
args = []
[lifecycle.start.env]
A = "1"
B_2 = ""
[lifecycle.stop]
exec = "agent"
[lifecycle.pause]
exec = "agent"
args = ["pause", "--now"]
[lifecycle.resume]
exec = "agent"
args = ["resume"]
env = { X = "y" }
[capabilities]
pause = { linux = "best-effort" }
[metering]
source = "engine-observed"
[interaction]
channel = "http"
)");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->start.exec, "/opt/agent/bin/agent");
  EXPECT_EQ(parsed->start.env, (std::map<std::string, std::string>{{"A", "1"}, {"B_2", ""}}));
  ASSERT_TRUE(parsed->stop && parsed->pause && parsed->resume);
  EXPECT_EQ(parsed->pause->args, (std::vector<std::string>{"pause", "--now"}));
  EXPECT_EQ(parsed->resume->env.at("X"), "y");
  EXPECT_EQ(parsed->metering, MeteringSource::kEngineObserved);
  EXPECT_EQ(parsed->channel, InteractionChannel::kHttp);
}

TEST(ManifestTest, SourceNamePrefixesErrors) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseManifest("", "/srv/agents/x/adapter.toml");
  EXPECT_TRUE(ManifestInvalid(parsed,
                              "/srv/agents/x/adapter.toml: missing mandatory key "
                              "'contract_version'"));
}

TEST(ManifestTest, TomlSyntaxErrorHasPosition) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse("contract_version = \"1.0.0\"\n[adapter\n");
  EXPECT_TRUE(ManifestInvalid(parsed, "adapter.toml:2:"));
  EXPECT_TRUE(ManifestInvalid(parsed, "TOML syntax error"));
  EXPECT_TRUE(ManifestInvalid(Parse("a = 1\na = 2\n"), "adapter.toml:2:"));
  EXPECT_TRUE(ManifestInvalid(Parse("x = \"\xff\"\n"), "TOML syntax error"));
  // toml++ 3.3 asserted on these headers (found by fuzz_manifest); they must be plain errors.
  EXPECT_TRUE(ManifestInvalid(Parse("[#lifecycle.start]\nexec = \"x\"\n"),
                              "adapter.toml:1:2: TOML syntax error"));
  EXPECT_TRUE(ManifestInvalid(Parse(std::string("[\x01\0[llm]]\n", 8)), "TOML syntax error"));
}

// The mandatory sections are checked in the documented order; the first problem is named.
struct OrderCase {
  const char* name;
  const char* text;
  const char* expected;
};

TEST(ManifestTest, FirstMissingMandatorySectionIsNamed) {
  const OrderCase cases[] = {
      {"nothing", "", "adapter.toml: missing mandatory key 'contract_version'"},
      {"only version", "contract_version = \"1.0.0\"\n",
       "adapter.toml: missing mandatory section [adapter]"},
      {"no lifecycle", "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n",
       "missing mandatory section [lifecycle.start]"},
      {"lifecycle without start",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.stop]\nexec = \"x\"\n",
       "missing mandatory section [lifecycle.start]"},
      {"no capabilities",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n",
       "missing mandatory section [capabilities]"},
      {"no metering",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "[capabilities.pause]\nlinux = \"guaranteed\"\n",
       "missing mandatory section [metering]"},
      // Several missing: the earliest in order wins.
      {"metering and adapter missing",
       "contract_version = \"1.0.0\"\n[lifecycle.start]\nexec = \"x\"\n",
       "missing mandatory section [adapter]"},
      {"empty adapter", "contract_version = \"1.0.0\"\n[adapter]\n",
       "mandatory section [adapter] is empty"},
      {"empty start", "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\n",
       "mandatory section [lifecycle.start] is empty"},
      {"empty capabilities",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "[capabilities]\n[metering]\nsource = \"self-reported\"\n",
       "mandatory section [capabilities] is empty"},
      {"empty metering",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "[capabilities.pause]\nlinux = \"guaranteed\"\n[metering]\n",
       "mandatory section [metering] is empty"},
      {"kind missing", "contract_version = \"1.0.0\"\n[adapter]\nname = \"n\"\n",
       "missing mandatory key 'kind' in [adapter]"},
      {"kind empty", "contract_version = \"1.0.0\"\n[adapter]\nkind = \"\"\n",
       "'kind' in [adapter] must not be empty"},
      {"exec missing",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nargs = []\n",
       "missing mandatory key 'exec' in [lifecycle.start]"},
      {"exec empty",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"\"\n",
       "'exec' in [lifecycle.start] must not be empty"},
  };
  for (const OrderCase& c : cases) {
    EXPECT_TRUE(ManifestInvalid(Parse(c.text), c.expected)) << c.name;
  }
}

TEST(ManifestTest, InvalidMandatorySectionIsReportedBeforeLaterMissingOnes) {
  // [capabilities] is invalid and [metering] is missing: the capabilities problem is named.
  absl::StatusOr<AdapterDeclaration> parsed = Parse(R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "x"
[capabilities.pause]
linux = "always"
)");
  EXPECT_TRUE(ManifestInvalid(parsed, "invalid support level 'always'"));
}

TEST(ManifestTest, ContractVersionChecks) {
  EXPECT_TRUE(ManifestInvalid(Parse("contract_version = 1\n"),
                              "adapter.toml:1:20: contract_version must be a string, got integer"));
  EXPECT_TRUE(ManifestInvalid(Parse("contract_version = \"1.0\"\n"),
                              "adapter.toml:1:20: invalid contract_version '1.0': expected strict "
                              "semver X.Y.Z"));
  EXPECT_TRUE(ManifestInvalid(Parse("contract_version = \"v1.0.0\"\n"), "'v1.0.0'"));
  std::string prerelease = kMinimalManifest;
  prerelease.replace(prerelease.find("1.0.0"), 5, "1.0.0-rc.1+build.5");
  absl::StatusOr<AdapterDeclaration> parsed = Parse(prerelease);
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->contract_version, "1.0.0-rc.1+build.5");
}

TEST(ManifestTest, ForeignMajorFailsWithTheExactSeedMessage) {
  std::string manifest = kMinimalManifest;
  manifest.replace(manifest.find("1.0.0"), 5, "2.1.0");
  absl::StatusOr<AdapterDeclaration> parsed = Parse(manifest);
  ASSERT_TRUE(
      StatusIs(parsed, absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible));
  EXPECT_EQ(
      Message(parsed.status()),
      "incompatible adapter contract: manifest declares 2.1.0, engine speaks 1.0.0 \xE2\x80\x94 "
      "compatible iff the major versions match (contract v1 policy, "
      "docs/adapter-contract.md#versioning)");
}

TEST(ManifestTest, ZeroMajorIsRejectedLikeAnyMismatch) {
  absl::StatusOr<AdapterDeclaration> parsed =
      Parse("contract_version = \"0.4.0\"\n[adapter]\nkind = \"k\"\n");
  EXPECT_TRUE(StatusIs(parsed, absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible,
                       "manifest declares 0.4.0, engine speaks"));
}

TEST(ManifestTest, VersionIsNegotiatedBeforeUnknownSections) {
  // A newer-major manifest may carry sections this engine does not know: the version wins.
  absl::StatusOr<AdapterDeclaration> parsed =
      Parse("contract_version = \"2.0.0\"\n[telemetry]\nx = 1\n");
  EXPECT_TRUE(
      StatusIs(parsed, absl::StatusCode::kFailedPrecondition, reason::kContractIncompatible));
  // A same-major manifest using an unknown section fails the unknown-key check.
  EXPECT_TRUE(
      ManifestInvalid(Parse(With("[telemetry]\nx = 1\n")), "unknown key 'telemetry' at top level"));
}

struct KeyCase {
  const char* name;
  std::string text;
  const char* expected;
};

TEST(ManifestTest, UnknownKeysAreRejectedAtEveryLevelWithPosition) {
  const KeyCase cases[] = {
      {"top level", WithTopLevel("foo = 1\n"), "adapter.toml:2:1: unknown key 'foo' at top level"},
      {"adapter", std::string(kMinimalManifest).insert(37, "knd = \"x\"\n"),
       "adapter.toml:3:1: unknown key 'knd' in [adapter] (allowed: kind, name)"},
      {"lifecycle op", With("[lifecycle.restart]\nexec = \"x\"\n"),
       "unknown key 'restart' in [lifecycle]: unknown lifecycle op (allowed: start, stop, "
       "pause, resume)"},
      {"op template", With("[lifecycle.stop]\nexce = \"x\"\n"),
       "adapter.toml:11:1: unknown key 'exce' in [lifecycle.stop] (allowed: exec, args, env)"},
      {"capability", With("[capabilities.snapshot]\nlinux = \"guaranteed\"\n"),
       "unknown key 'snapshot' in [capabilities]: unknown capability (allowed: pause, "
       "interaction)"},
      {"os", With("[capabilities.interaction]\nfreebsd = \"guaranteed\"\n"),
       "adapter.toml:11:1: unknown key 'freebsd' in [capabilities.interaction]: unknown OS"},
      {"metering", With("[metering.extra]\n"), "unknown key 'extra' in [metering]"},
      {"metering upstream", std::string(kMinimalManifest) + "upstream_base_url = \"http://x\"\n",
       "unknown key 'upstream_base_url' in [metering] (allowed: source)"},
      {"interaction", With("[interaction]\nchanel = \"stdio\"\n"),
       "adapter.toml:11:1: unknown key 'chanel' in [interaction] (allowed: channel)"},
  };
  for (const KeyCase& c : cases) {
    EXPECT_TRUE(ManifestInvalid(Parse(c.text), c.expected)) << c.name << "\n" << c.text;
  }
}

TEST(ManifestTest, UnknownKeyInStartTemplate) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "x"
exce = "y"
)");
  EXPECT_TRUE(ManifestInvalid(parsed, "adapter.toml:6:1: unknown key 'exce' in [lifecycle.start]"));
}

TEST(ManifestTest, FirstUnknownKeyInDocumentOrderIsNamed) {
  EXPECT_TRUE(ManifestInvalid(Parse(WithTopLevel("zzz = 1\naaa = 2\n")), "unknown key 'zzz'"));
}

TEST(ManifestTest, TypeChecksCarryPositions) {
  const KeyCase cases[] = {
      {"adapter not table", "contract_version = \"1.0.0\"\nadapter = \"k\"\n",
       "adapter.toml:2:11: [adapter] must be a table, got string"},
      {"kind not string", "contract_version = \"1.0.0\"\n[adapter]\nkind = 3\n",
       "adapter.toml:3:8: 'kind' in [adapter] must be a string, got integer"},
      {"name not string", "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\nname = true\n",
       "adapter.toml:4:8: 'name' in [adapter] must be a string, got boolean"},
      {"lifecycle not table",
       "contract_version = \"1.0.0\"\nlifecycle = 1\n[adapter]\nkind = \"k\"\n",
       "adapter.toml:2:13: [lifecycle] must be a table, got integer"},
      {"start not table",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle]\nstart = \"x\"\n",
       "adapter.toml:5:9: [lifecycle.start] must be a table, got string"},
      {"exec not string",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = [\"x\"]\n",
       "adapter.toml:5:8: 'exec' in [lifecycle.start] must be a string, got array"},
      {"args not array",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "args = \"--serve\"\n",
       "adapter.toml:6:8: 'args' in [lifecycle.start] must be an array of strings, got string"},
      {"args element not string",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "args = [\"a\", 2]\n",
       "adapter.toml:6:14: args[1] in [lifecycle.start] must be a string, got integer"},
      {"env not table",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "env = [\"A=1\"]\n",
       "adapter.toml:6:7: 'env' in [lifecycle.start] must be a table of strings, got array"},
      {"env value not string",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "env = { A = 1 }\n",
       "adapter.toml:6:13: env value 'A' in [lifecycle.start] must be a string, got integer"},
      {"env bad name",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "env = { \"A=B\" = \"1\" }\n",
       "env name 'A=B' in [lifecycle.start] is invalid"},
      {"exec with NUL",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = "
       "\"a\\u0000b\"\n",
       "'exec' in [lifecycle.start] must not contain a NUL byte"},
      {"arg with NUL",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
       "args = [\"\\u0000\"]\n",
       "args[0] in [lifecycle.start] contains a NUL byte"},
      {"capabilities not table",
       "contract_version = \"1.0.0\"\ncapabilities = 1\n[adapter]\nkind = \"k\"\n"
       "[lifecycle.start]\nexec = \"x\"\n",
       "adapter.toml:2:16: [capabilities] must be a table, got integer"},
      {"capability not table", With("[capabilities]\ninteraction = \"guaranteed\"\n"),
       "adapter.toml:11:15: [capabilities.interaction] must be a table, got string"},
      {"level not string", With("[capabilities.interaction]\nlinux = 1\n"),
       "adapter.toml:11:9: 'linux' in [capabilities.interaction] must be a string, got integer"},
      {"metering not table",
       "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n"
       "[lifecycle.start]\nexec = \"x\"\n[capabilities.pause]\nlinux = "
       "\"guaranteed\"\nmetering = \"self-reported\"\n",
       "[capabilities.pause]: unknown OS"},
      {"source not string",
       std::string(kMinimalManifest)
           .replace(std::string(kMinimalManifest).find("\"self-reported\""), 15, "1"),
       "'source' in [metering] must be a string, got integer"},
      {"interaction not table", WithTopLevel("interaction = \"stdio\"\n"),
       "adapter.toml:2:15: [interaction] must be a table, got string"},
      {"channel not string", With("[interaction]\nchannel = [\"stdio\"]\n"),
       "'channel' in [interaction] must be a string, got array"},
      {"stop not table", With("[lifecycle]\nstop = 5\n"),
       "adapter.toml:11:8: [lifecycle.stop] must be a table, got integer"},
      {"stop empty", With("[lifecycle.stop]\n"), "section [lifecycle.stop] is empty"},
      {"pause exec missing", With("[lifecycle.pause]\nargs = [\"p\"]\n"),
       "missing mandatory key 'exec' in [lifecycle.pause]"},
  };
  for (const KeyCase& c : cases) {
    EXPECT_TRUE(ManifestInvalid(Parse(c.text), c.expected)) << c.name << "\n" << c.text;
  }
}

TEST(ManifestTest, ClosedEnumsRejectUnknownValues) {
  EXPECT_TRUE(ManifestInvalid(Parse(With("[capabilities.interaction]\nlinux = \"sometimes\"\n")),
                              "adapter.toml:11:9: 'linux' in [capabilities.interaction]: invalid "
                              "support level 'sometimes': expected one of guaranteed, "
                              "best-effort, unsupported"));
  std::string metering = kMinimalManifest;
  metering.replace(metering.find("self-reported"), 13, "proxy");
  EXPECT_TRUE(ManifestInvalid(Parse(metering),
                              "adapter.toml:9:10: 'source' in [metering]: "
                              "invalid metering source 'proxy': expected one "
                              "of self-reported, engine-observed"));
  EXPECT_TRUE(ManifestInvalid(Parse(With("[interaction]\nchannel = \"grpc\"\n")),
                              "adapter.toml:11:11: 'channel' in [interaction]: invalid interaction "
                              "channel 'grpc': expected one of stdio, http"));
}

TEST(ManifestTest, KindAndNameAreBoundedPrintableText) {
  auto with_adapter = [](const std::string& lines) {
    std::string manifest = kMinimalManifest;
    manifest.replace(manifest.find("kind = \"k\"\n"), 11, lines);
    return manifest;
  };
  EXPECT_TRUE(IsOk(Parse(with_adapter("kind = \"" + std::string(128, 'k') + "\"\n"))));
  EXPECT_TRUE(ManifestInvalid(Parse(with_adapter("kind = \"" + std::string(129, 'k') + "\"\n")),
                              "'kind' in [adapter] is longer than 128 bytes"));
  EXPECT_TRUE(ManifestInvalid(Parse(with_adapter("kind = \"a\\nb\"\n")),
                              "'kind' in [adapter] holds a control character"));
  EXPECT_TRUE(ManifestInvalid(Parse(with_adapter("kind = \"a\\u001b[31m\"\n")),
                              "'kind' in [adapter] holds a control character"));
  EXPECT_TRUE(IsOk(Parse(with_adapter("kind = \"k\"\nname = \"My Agent — v2\"\n"))));
  EXPECT_TRUE(ManifestInvalid(Parse(with_adapter("kind = \"k\"\nname = \"a\\tb\"\n")),
                              "'name' in [adapter] holds a control character"));
  // An enum's bad value is quoted escaped, never raw.
  absl::StatusOr<AdapterDeclaration> raw =
      Parse(With("[capabilities.interaction]\nlinux = \"x\\u0000\\u001b\"\n"));
  EXPECT_TRUE(ManifestInvalid(raw, "invalid support level 'x\\x00\\x1b'")) << raw.status();
}

TEST(ManifestTest, InteractionSectionWithoutChannelMeansStdio) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(With("[interaction]\n"));
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->channel, InteractionChannel::kStdio);
}

TEST(ManifestTest, CapabilityWithoutEntryProjectsToUnsupported) {
  absl::StatusOr<AdapterDeclaration> parsed =
      Parse(With("[capabilities.interaction]\nmacos = \"best-effort\"\n"));
  ASSERT_TRUE(IsOk(parsed));
  const CapabilityDeclaration& c = parsed->capabilities;
  EXPECT_EQ(c.Project(Capability::kPause, Os::kLinux), SupportLevel::kGuaranteed);
  EXPECT_EQ(c.Project(Capability::kPause, Os::kMacos), SupportLevel::kUnsupported);
  EXPECT_FALSE(c.HasEntry(Capability::kPause, Os::kMacos));
  EXPECT_EQ(c.Project(Capability::kInteraction, Os::kMacos), SupportLevel::kBestEffort);
  EXPECT_EQ(c.Project(Capability::kInteraction, Os::kWindows), SupportLevel::kUnsupported);
}

TEST(ManifestTest, NonViableDeclarationIsRejected) {
  const char* kAllUnsupported = R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "x"
[capabilities.pause]
linux = "unsupported"
macos = "unsupported"
windows = "unsupported"
[capabilities.interaction]
linux = "unsupported"
[metering]
source = "self-reported"
)";
  EXPECT_TRUE(ManifestInvalid(Parse(kAllUnsupported),
                              "capability declaration in [capabilities] is not viable"));
  // A capability sub-table with no entries at all is equally non-viable.
  const char* kOnlyEmpty = R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "x"
[capabilities.interaction]
[metering]
source = "self-reported"
)";
  EXPECT_TRUE(ManifestInvalid(Parse(kOnlyEmpty), "not viable"));
}

TEST(ManifestTest, SingleCapabilityAdapterOnOneOsIsViable) {
  // e.g. an HTTP-native agent: interaction declared, pause unsupported.
  absl::StatusOr<AdapterDeclaration> parsed = Parse(R"(contract_version = "1.0.0"
[adapter]
kind = "opencode"
[lifecycle.start]
exec = "opencode"
args = ["serve", "--port", "4096"]
[capabilities.pause]
linux = "unsupported"
[capabilities.interaction]
windows = "best-effort"
[metering]
source = "engine-observed"
[interaction]
channel = "http"
)");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_TRUE(parsed->capabilities.IsViable());
}

TEST(ManifestTest, InlineAndDottedSpellingsAreEquivalent) {
  absl::StatusOr<AdapterDeclaration> dotted = Parse(R"(contract_version = "1.0.0"
adapter.kind = "k"
lifecycle.start.exec = "x"
capabilities.pause.linux = "guaranteed"
metering.source = "self-reported"
)");
  absl::StatusOr<AdapterDeclaration> tables = Parse(kMinimalManifest);
  ASSERT_TRUE(IsOk(dotted));
  ASSERT_TRUE(IsOk(tables));
  EXPECT_EQ(*dotted, *tables);
}

TEST(ManifestTest, ErrorsWithoutPositionUseSourceOnlyPrefix) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseManifest("contract_version = \"1.0.0\"\n", "m");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(Message(parsed.status()), "m: missing mandatory section [adapter]");
}

TEST(ManifestTest, ArbitraryKeysAreEscapedInMessages) {
  absl::StatusOr<AdapterDeclaration> parsed = Parse(WithTopLevel("\"bad\\u0001key\" = 1\n"));
  EXPECT_TRUE(ManifestInvalid(parsed, "unknown key 'bad\\x01key' at top level"));
}

}  // namespace
}  // namespace ktesio::contract
