// ParseManifest's [config] section: targets, spellings of dotted keys, confinement, conflicts.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/manifest.h"
#include "manifests.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::ManifestInvalid;

using ::ktesio::testing::kMinimalManifest;

// Parses kMinimalManifest plus `config` (which starts at line 10).
absl::StatusOr<AdapterDeclaration> ParseConfig(std::string_view config) {
  return ParseManifest(std::string(kMinimalManifest) + std::string(config), "adapter.toml");
}

TEST(ManifestConfigTest, EachTargetKind) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseConfig(R"(
[config.model]
env = "MODEL"
[config."logs.keep"]
flag = "--keep"
[config."metering.upstream_base_url"]
file = { path = "config/agent.toml", key = "llm.endpoint" }
)");
  ASSERT_TRUE(IsOk(parsed));
  ASSERT_EQ(parsed->config.size(), 3u);
  const ConfigTarget& env = parsed->config.at("model");
  EXPECT_EQ(env.kind, ConfigTarget::Kind::kEnv);
  EXPECT_EQ(env.env, "MODEL");
  const ConfigTarget& flag = parsed->config.at("logs.keep");
  EXPECT_EQ(flag.kind, ConfigTarget::Kind::kFlag);
  EXPECT_EQ(flag.flag, "--keep");
  const ConfigTarget& file = parsed->config.at("metering.upstream_base_url");
  EXPECT_EQ(file.kind, ConfigTarget::Kind::kFile);
  EXPECT_EQ(file.file_path, "config/agent.toml");
  EXPECT_EQ(file.file_key, "llm.endpoint");
}

TEST(ManifestConfigTest, QuotedAndNestedSpellingsNameTheSameKey) {
  absl::StatusOr<AdapterDeclaration> quoted =
      ParseConfig("[config.\"memory.dir\"]\nenv = \"AGENT_HOME\"\n");
  absl::StatusOr<AdapterDeclaration> nested =
      ParseConfig("[config.memory.dir]\nenv = \"AGENT_HOME\"\n");
  ASSERT_TRUE(IsOk(quoted));
  ASSERT_TRUE(IsOk(nested));
  EXPECT_EQ(quoted->config, nested->config);
  ASSERT_EQ(nested->config.count("memory.dir"), 1u);
  EXPECT_EQ(nested->config.at("memory.dir").env, "AGENT_HOME");
}

TEST(ManifestConfigTest, NamespacesHoldSeveralKeys) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseConfig(R"(
[config.budget.tokens.per_run]
env = "PER_RUN"
[config.budget.tokens.cumulative]
flag = "--cumulative"
[config.metering]
base_url = { env = "OPENAI_BASE_URL" }
)");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->config.at("budget.tokens.per_run").env, "PER_RUN");
  EXPECT_EQ(parsed->config.at("budget.tokens.cumulative").flag, "--cumulative");
  EXPECT_EQ(parsed->config.at("metering.base_url").env, "OPENAI_BASE_URL");
}

TEST(ManifestConfigTest, FileTargetAsSubTable) {
  absl::StatusOr<AdapterDeclaration> parsed =
      ParseConfig("[config.model.file]\npath = \"./cfg//agent.toml\"\nkey = \"llm.model\"\n");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->config.at("model").file_path, "cfg/agent.toml");  // stored normalized
}

TEST(ManifestConfigTest, EmptyConfigSectionIsFine) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseConfig("[config]\n");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_TRUE(parsed->config.empty());
}

struct ErrorCase {
  const char* name;
  const char* config;
  const char* expected;
};

TEST(ManifestConfigTest, Rejections) {
  const ErrorCase cases[] = {
      {"zero targets (empty)", "[config.model]\n",
       "adapter.toml:10:1: [config.model] is empty: expected exactly one of env, flag, file"},
      {"two targets", "[config.model]\nenv = \"MODEL\"\nflag = \"--model\"\n",
       "adapter.toml:12:1: config key 'model' in [config.model] declares 2 targets (env, "
       "flag): exactly one of env, flag, file is allowed"},
      {"three targets",
       "[config.model]\nenv = \"M\"\nflag = \"-m\"\nfile = { path = \"a\", key = \"b\" }\n",
       "declares 3 targets"},
      {"unknown key beside target", "[config.model]\nenv = \"MODEL\"\nenvv = \"X\"\n",
       "adapter.toml:12:1: unknown key 'envv' in [config.model] (allowed: exactly one of env, "
       "flag, file)"},
      {"unknown key without target", "[config.model]\nenvv = \"X\"\n",
       "adapter.toml:11:1: unknown key 'envv' in [config.model] (a mapping holds exactly one of "
       "env, flag, file; a namespace holds only sub-tables)"},
      {"mapping mixed with namespace",
       "[config.memory]\nenv = \"M\"\n[config.memory.dir]\nenv = "
       "\"D\"\n",
       "[config.memory] mixes a mapping (env/flag/file) with nested key 'dir'"},
      {"entry not a table", "[config]\nmodel = \"MODEL\"\n",
       "adapter.toml:11:1: [config.model] must be a table holding exactly one of env, flag, "
       "file, got string"},
      {"same key twice", "[config.\"memory.dir\"]\nenv = \"A\"\n[config.memory.dir]\nenv = \"B\"\n",
       "config key 'memory.dir' is mapped twice"},
      {"invalid unified key", "[config.\"bad key\"]\nenv = \"A\"\n",
       "config key 'bad key' in [config.\"bad key\"] is invalid"},
      {"empty segment", "[config.\"a..b\"]\nenv = \"A\"\n", "config key 'a..b'"},
      {"env not a string", "[config.model]\nenv = 1\n",
       "adapter.toml:11:7: 'env' in [config.model] must be a string, got integer"},
      {"env invalid name", "[config.model]\nenv = \"1MODEL\"\n",
       "adapter.toml:11:7: 'env' in [config.model]: '1MODEL' is not a valid env variable name"},
      {"env with dash", "[config.model]\nenv = \"MY-MODEL\"\n", "not a valid env variable name"},
      {"env empty", "[config.model]\nenv = \"\"\n", "not a valid env variable name"},
      {"flag empty", "[config.model]\nflag = \"\"\n",
       "'flag' in [config.model] must be a non-empty flag"},
      {"flag not string", "[config.model]\nflag = [\"--m\"]\n",
       "'flag' in [config.model] must be a string, got array"},
      {"file not table", "[config.model]\nfile = \"agent.toml\"\n",
       "adapter.toml:11:8: 'file' in [config.model] must be a table"},
      {"file missing key", "[config.model]\nfile = { path = \"a.toml\" }\n",
       "missing mandatory key 'key' in 'file' in [config.model]"},
      {"file missing path", "[config.model]\nfile = { key = \"a\" }\n",
       "missing mandatory key 'path' in 'file' in [config.model]"},
      {"file extra key",
       "[config.model]\nfile = { path = \"a\", key = \"b\", format = \"json\" }\n",
       "unknown key 'format' in 'file' in [config.model] (allowed: path, key)"},
      {"file path not string", "[config.model]\nfile = { path = 1, key = \"b\" }\n",
       "'path' of 'file' in [config.model] must be a string, got integer"},
      {"file key empty", "[config.model]\nfile = { path = \"a\", key = \"\" }\n",
       "'key' of 'file' in [config.model]: '' must be a dotted key"},
      {"file key not bare", "[config.model]\nfile = { path = \"a\", key = \"llm model\" }\n",
       "must be a dotted key of bare segments"},
      {"file key trailing dot", "[config.model]\nfile = { path = \"a\", key = \"llm.\" }\n",
       "must be a dotted key"},
      {"absolute path", "[config.model]\nfile = { path = \"/etc/agent.toml\", key = \"m\" }\n",
       "adapter.toml:11:17: 'path' of 'file' in [config.model]: file path '/etc/agent.toml' must "
       "stay inside the Agent Home: it is absolute"},
      {"escaping path", "[config.model]\nfile = { path = \"config/../../x.toml\", key = \"m\" }\n",
       "'..' leads out of it"},
      {"windows drive", "[config.model]\nfile = { path = \"C:\\\\agent.toml\", key = \"m\" }\n",
       "Windows drive"},
      {"unc path",
       "[config.model]\nfile = { path = \"\\\\\\\\server\\\\share\\\\a.toml\", key = "
       "\"m\" }\n",
       "it is absolute"},
      {"empty path", "[config.model]\nfile = { path = \"\", key = \"m\" }\n", "it is empty"},
      {"nul in path", "[config.model]\nfile = { path = \"a\\u0000b\", key = \"m\" }\n", "NUL byte"},
      {"home itself", "[config.model]\nfile = { path = \"a/..\", key = \"m\" }\n",
       "names the home itself"},
      {"two keys one env", "[config.model]\nenv = \"M\"\n[config.autostart]\nenv = \"M\"\n",
       "adapter.toml: config keys 'autostart' and 'model' are both delivered to env variable M"},
      {"file keys nested",
       "[config.\"agent.A\"]\nfile = { path = \"c.toml\", key = \"llm\" }\n"
       "[config.\"agent.B\"]\nfile = { path = \"./c.toml\", key = \"llm.model\" }\n",
       "config keys 'agent.A' and 'agent.B' conflict in file 'c.toml': native keys 'llm' and "
       "'llm.model'"},
      {"undocumented key", "[config.modle]\nenv = \"M\"\n",
       "adapter.toml:10:1: unknown config key 'modle' in [config.modle] (did you mean 'model'?): a "
       "manifest maps documented unified keys"},
      {"undocumented nested key", "[config.llm.endpoint]\nenv = \"M\"\n",
       "unknown config key 'llm.endpoint' in [config.llm.endpoint]"},
      {"pass-through tail no env name", "[config.\"agent.1X\"]\nenv = \"M\"\n",
       "unknown config key 'agent.1X' in [config.\"agent.1X\"]: an agent.<NAME> key needs NAME to "
       "be a valid environment variable name"},
      {"file keys equal",
       "[config.\"agent.A\"]\nfile = { path = \"c.toml\", key = \"m\" }\n"
       "[config.\"agent.B\"]\nfile = { path = \"c.toml\", key = \"m\" }\n",
       "conflict in file 'c.toml'"},
  };
  for (const ErrorCase& c : cases) {
    EXPECT_TRUE(ManifestInvalid(ParseConfig(c.config), c.expected)) << c.name;
  }
}

TEST(ManifestConfigTest, ConfigMustBeATable) {
  std::string manifest = kMinimalManifest;
  manifest.insert(manifest.find('\n') + 1, "config = 1\n");
  EXPECT_TRUE(ManifestInvalid(ParseManifest(manifest, "adapter.toml"),
                              "adapter.toml:2:10: [config] must be a table, got integer"));
}

TEST(ManifestConfigTest, SameNativeKeyInDifferentFilesOrPrefixNamesIsFine) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseConfig(R"(
[config."agent.A"]
file = { path = "one.toml", key = "llm" }
[config."agent.B"]
file = { path = "two.toml", key = "llm" }
[config."agent.C"]
file = { path = "one.toml", key = "llmx.model" }
[config."agent.D"]
flag = "--v"
[config."agent.E"]
flag = "--v"
)");
  EXPECT_TRUE(IsOk(parsed));
}

TEST(ManifestConfigTest, MemoryDirAndAgentKeysMapLikeAnyOther) {
  absl::StatusOr<AdapterDeclaration> parsed = ParseConfig(R"(
[config."memory.dir"]
env = "XDG_DATA_HOME"
[config."agent.TOKEN"]
env = "AGENT_TOKEN"
)");
  ASSERT_TRUE(IsOk(parsed));
  EXPECT_EQ(parsed->config.at("memory.dir").env, "XDG_DATA_HOME");
  EXPECT_EQ(parsed->config.at("agent.TOKEN").env, "AGENT_TOKEN");
}

}  // namespace
}  // namespace ktesio::contract
