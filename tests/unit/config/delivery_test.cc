#include "config/delivery.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/delivery_files.h"
#include "config_targets.h"
#include "gtest/gtest.h"
#include "testing.h"

namespace ktesio::daemon::config {
namespace {

using contract::ConfigTarget;
using testing::IsOk;
using testing::ReadAll;
using testing::StatusIs;
using testing::TempDir;
using testing::WriteAll;
namespace reason = contract::reason;

// Short names: the mappings below are written out by the dozen.
ConfigTarget Env(std::string name) { return ::ktesio::testing::EnvTarget(std::move(name)); }
ConfigTarget Flag(std::string flag) { return ::ktesio::testing::FlagTarget(std::move(flag)); }
ConfigTarget File(std::string path, std::string key) {
  return ::ktesio::testing::FileTarget(std::move(path), std::move(key));
}

// A resolver over a fixed map, recording what was asked.
SecretResolver FakeSecrets(std::map<std::string, std::string> secrets) {
  return [secrets = std::move(secrets)](std::string_view name) -> absl::StatusOr<std::string> {
    auto it = secrets.find(std::string(name));
    if (it == secrets.end()) {
      return contract::MakeError(absl::StatusCode::kFailedPrecondition, "DELIVERY_FAILED",
                                 "secret '" + std::string(name) +
                                     "' is not resolvable: tried "
                                     "the secrets store and the daemon environment variable " +
                                     std::string(name));
    }
    return it->second;
  };
}

DeliveryInput MakeInput(std::map<std::string, ConfigTarget> mapping,
                        std::map<std::string, std::string> instance) {
  DeliveryInput input;
  input.mapping = std::move(mapping);
  Layers layers;
  layers.instance = std::move(instance);
  input.effective = Effective(layers);
  return input;
}

bool HasNotice(const DeliveryPlan& plan, Notice::Level level, std::string_view key,
               std::string_view substring) {
  for (const Notice& notice : plan.notices) {
    if (notice.level == level && notice.key == key &&
        notice.message.find(substring) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(DeliveryTest, DeliversMappedKeysThroughEachTarget) {
  DeliveryInput input =
      MakeInput({{"model", Env("MODEL")},
                 {"restart.policy", Flag("--restart")},
                 {"budget.tokens.per_run", File("conf/agent.toml", "limits.tokens")},
                 {"cost.rate.input", File("conf/agent.toml", "pricing.input")}},
                {{"model", "gpt"},
                 {"budget.tokens.per_run", "100"},
                 {"cost.rate.input", "2.5"},
                 {"logs.keep", "4"}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(plan->env, (std::map<std::string, std::string>{{"MODEL", "gpt"}}));
  EXPECT_EQ(plan->argv_tail, (std::vector<std::string>{"--restart", "on-failure"}));
  ASSERT_EQ(plan->files.size(), 1u);
  EXPECT_EQ(plan->files.at("conf/agent.toml"),
            "[limits]\ntokens = \"100\"\n\n[pricing]\ninput = \"2.5\"\n");
  EXPECT_TRUE(plan->notices.empty());
  EXPECT_EQ(FileTargetPaths(input), (std::vector<std::string>{"conf/agent.toml"}));
}

TEST(DeliveryTest, UnmappedKeysAreSilentExceptMemoryDir) {
  DeliveryInput input = MakeInput({}, {{"model", "gpt"}, {"restart.policy", "never"}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_TRUE(plan->env.empty());
  EXPECT_TRUE(plan->argv_tail.empty());
  EXPECT_TRUE(plan->notices.empty());

  Layers layers;
  layers.invocation_override = {{"memory.dir", "/h/memory"}, {"metering.base_url", "http://p"}};
  input.effective = Effective(layers);
  plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  ASSERT_EQ(plan->notices.size(), 1u);
  EXPECT_TRUE(HasNotice(*plan, Notice::Level::kInfo, "memory.dir", "not mapped"));

  input.mapping = {{"memory.dir", Env("HERMES_HOME")}, {"metering.base_url", Env("BASE")}};
  plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_TRUE(plan->notices.empty());
  EXPECT_EQ(plan->env, (std::map<std::string, std::string>{{"BASE", "http://p"},
                                                           {"HERMES_HOME", "/h/memory"}}));
}

TEST(DeliveryTest, AgentPassThroughIsDeliveredVerbatim) {
  DeliveryInput input = MakeInput(
      {{"model", Env("MODEL")}},
      {{"agent.FOO", "bar baz"}, {"agent.MODEL", "shadowed"}, {"model", "m"}, {"agent.EMPTY", ""}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(plan->env, (std::map<std::string, std::string>{
                           {"EMPTY", ""}, {"FOO", "bar baz"}, {"MODEL", "m"}}));
  EXPECT_TRUE(HasNotice(*plan, Notice::Level::kWarning, "agent.MODEL",
                        "MODEL is delivered by config key 'model'"));
}

TEST(DeliveryTest, PassThroughWithABadTailFromAKindDefaultIsSkippedWithAWarning) {
  DeliveryInput input;
  Layers layers;
  layers.kind_default = {{"agent.not-an-env", "x"}};
  input.effective = Effective(layers);
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_TRUE(plan->env.empty());
  EXPECT_TRUE(HasNotice(*plan, Notice::Level::kWarning, "agent.not-an-env",
                        "not a valid environment variable name"));
}

TEST(DeliveryTest, ExplicitMappingOfAPassThroughKeyWins) {
  DeliveryInput input = MakeInput({{"agent.FOO", Flag("--foo")}}, {{"agent.FOO", "x"}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_TRUE(plan->env.empty());
  EXPECT_EQ(plan->argv_tail, (std::vector<std::string>{"--foo", "x"}));
}

TEST(DeliveryTest, SecretsResolveOnlyIntoNativeTargets) {
  DeliveryInput input =
      MakeInput({{"model", File("a.toml", "llm.model")}, {"agent.KEY", Env("API_KEY")}},
                {{"model", "secret:M"}, {"agent.KEY", "secret:K"}, {"agent.TOKEN", "secret:T"}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(
      input, FakeSecrets({{"M", "clear-model"}, {"K", "clear-key"}, {"T", "clear-token"}}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(plan->env.at("API_KEY"), "clear-key");
  EXPECT_EQ(plan->env.at("TOKEN"), "clear-token");
  EXPECT_EQ(plan->files.at("a.toml"), "[llm]\nmodel = \"clear-model\"\n");
  EXPECT_EQ(plan->effective_config_json.find("clear-"), std::string::npos);
  EXPECT_NE(plan->effective_config_json.find(
                "{\"key\":\"model\",\"value\":\"secret:****\",\"source\":\"instance\","
                "\"unvalidated\":false}"),
            std::string::npos)
      << plan->effective_config_json;
  EXPECT_NE(plan->effective_config_json.find(
                "{\"key\":\"agent.TOKEN\",\"value\":\"secret:****\",\"source\":\"instance\","
                "\"unvalidated\":true}"),
            std::string::npos);
  EXPECT_TRUE(plan->effective_config_json.starts_with("{\"schema_version\":1,\"entries\":["));
  for (const Notice& notice : plan->notices) {
    EXPECT_EQ(notice.message.find("clear-"), std::string::npos);
  }
}

TEST(DeliveryTest, UnresolvedSecretRefusesTheStart) {
  DeliveryInput input = MakeInput({{"model", Env("MODEL")}}, {{"model", "secret:GONE"}});
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED", "config key 'model': secret 'GONE' is not resolvable"));
}

TEST(DeliveryTest, SecretThroughAFlagWarns) {
  DeliveryInput input = MakeInput({{"model", Flag("--model")}}, {{"model", "secret:M"}});
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({{"M", "clear"}}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(plan->argv_tail, (std::vector<std::string>{"--model", "clear"}));
  EXPECT_TRUE(
      HasNotice(*plan, Notice::Level::kWarning, "model", "argv is visible to other local users"));
  // A plain value through a flag draws no warning.
  input = MakeInput({{"model", Flag("--model")}}, {{"model", "plain"}});
  plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_TRUE(plan->notices.empty());
}

TEST(DeliveryTest, EnvShadowingTheStartTemplateIsANotice) {
  DeliveryInput input = MakeInput({{"model", Env("MODEL")}}, {{"model", "m"}, {"agent.X", "1"}});
  input.template_env = {{"MODEL", "template"}, {"X", "template"}, {"OTHER", "o"}};
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  EXPECT_EQ(plan->env.at("MODEL"), "m");
  EXPECT_TRUE(HasNotice(*plan, Notice::Level::kInfo, "model",
                        "delivers MODEL, which overrides the start template's MODEL"));
  EXPECT_TRUE(HasNotice(*plan, Notice::Level::kInfo, "agent.X", "overrides"));
  EXPECT_EQ(plan->notices.size(), 2u);
}

TEST(DeliveryTest, EnvPlaceholderMustBeSetInTheChildEnvironment) {
  const std::map<std::string, ConfigTarget> mapping = {{"model", File("c.toml", "model")},
                                                       {"agent.OPENAI_KEY", Env("OPENAI_KEY")}};
  DeliveryInput input = MakeInput(mapping, {{"model", "key={env:OPENAI_KEY}"}});
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED",
                       "config key 'model' references {env:OPENAI_KEY}, which is not set in "
                       "the agent's environment"));
  // Set by the start template.
  input.template_env = {{"OPENAI_KEY", "t"}};
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({}))));
  // Set by the base environment.
  input.template_env.clear();
  input.base_env = {{"OPENAI_KEY", "b"}};
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({}))));
  // Set by a delivered key (agent.* pass-through here).
  input.base_env.clear();
  input = MakeInput(mapping, {{"model", "key={env:OPENAI_KEY}"}, {"agent.OPENAI_KEY", "d"}});
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({}))));
  // Set but empty counts as unset.
  input = MakeInput(mapping, {{"model", "key={env:OPENAI_KEY}"}});
  input.base_env = {{"OPENAI_KEY", ""}};
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED", "{env:OPENAI_KEY}"));
}

TEST(DeliveryTest, EnvPlaceholderCheckCoversEveryTargetAndSecrets) {
  DeliveryInput input = MakeInput({{"model", Flag("--model")}}, {{"model", "{env:A}{env:B}"}});
  input.base_env = {{"A", "1"}};
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED", "{env:B}"));
  input = MakeInput({}, {{"agent.CFG", "secret:S"}});
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({{"S", "{\"k\":\"{env:HIDDEN}\"}"}})),
                       absl::StatusCode::kFailedPrecondition, "DELIVERY_FAILED",
                       "config key 'agent.CFG' references {env:HIDDEN}"));
  // A placeholder no environment can hold gets no remedy that cannot work ('agent.1X' is not
  // a key that can be set).
  for (const char* invalid : {"{env:1X}", "{env: NOPE}"}) {
    input = MakeInput({{"model", Flag("--model")}}, {{"model", invalid}});
    absl::StatusOr<DeliveryPlan> refused = PlanDelivery(input, FakeSecrets({}));
    EXPECT_TRUE(StatusIs(refused, absl::StatusCode::kFailedPrecondition, "DELIVERY_FAILED",
                         "which is not a valid environment variable name"))
        << invalid;
    EXPECT_EQ(refused.status().message().find("set config key"), std::string_view::npos);
  }
  // The start template's own env values and args render into the agent too.
  input = MakeInput({}, {});
  input.template_env = {{"CFG", "{\"k\":\"{env:UNSET_TPL}\"}"}};
  EXPECT_TRUE(
      StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
               "DELIVERY_FAILED",
               "the start template's env CFG references {env:UNSET_TPL}, which is not set"));
  input.base_env = {{"UNSET_TPL", "v"}};
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({}))));
  input = MakeInput({}, {{"agent.CFG", "delivered"}});
  input.template_env = {{"CFG", "{env:UNSET_TPL}"}};
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({})))) << "a replaced value is not rendered";
  input = MakeInput({}, {});
  input.template_args = {"--serve", "--key={env:UNSET_ARG}"};
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED",
                       "the start template's argument 2 references {env:UNSET_ARG}"));
  // Unmapped values are not delivered, so not checked.
  input = MakeInput({}, {{"model", "{env:NOPE}"}});
  EXPECT_TRUE(IsOk(PlanDelivery(input, FakeSecrets({}))));
}

TEST(DeliveryTest, FileTargetsMergeIntoExistingContent) {
  DeliveryInput input = MakeInput({{"model", File("cfg/a.toml", "llm.model")}}, {{"model", "m"}});
  input.existing_files = {{"cfg/a.toml", "keep = 1\n[llm]\nmodel = \"old\"\n"}};
  absl::StatusOr<DeliveryPlan> plan = PlanDelivery(input, FakeSecrets({}));
  ASSERT_TRUE(IsOk(plan));
  const std::string& document = plan->files.at("cfg/a.toml");
  EXPECT_NE(document.find("keep = 1"), std::string::npos) << document;
  EXPECT_NE(document.find("model = \"m\""), std::string::npos) << document;
  EXPECT_EQ(document.find("old"), std::string::npos) << document;

  input.existing_files = {{"cfg/a.toml", "not toml ["}};
  EXPECT_TRUE(StatusIs(PlanDelivery(input, FakeSecrets({})), absl::StatusCode::kFailedPrecondition,
                       "DELIVERY_FAILED", "file target 'cfg/a.toml'"));
}

TEST(DeliveryTest, InputForUsesTheDeclaration) {
  contract::AdapterDeclaration declaration;
  declaration.config = {{"model", Env("MODEL")}};
  declaration.start.env = {{"MODEL", "t"}};
  DeliveryInput input = InputFor(declaration, Effective(Layers{}), {{"PATH", "/bin"}});
  EXPECT_EQ(input.mapping, declaration.config);
  EXPECT_EQ(input.template_env, declaration.start.env);
  EXPECT_EQ(input.base_env.at("PATH"), "/bin");
  EXPECT_EQ(input.effective.size(), 9u);
}

TEST(DeliveryTest, StoreResolverUsesStoreThenEnvironment) {
  TempDir state;
  SecretsStore store(state.path());
  ASSERT_TRUE(IsOk(store.Set("K", "from-store")));
  SecretResolver resolve =
      StoreResolver(store, [](const std::string& name) -> std::optional<std::string> {
        return name == "E" || name == "K" ? std::optional<std::string>("from-env") : std::nullopt;
      });
  EXPECT_EQ(*resolve("K"), "from-store");
  EXPECT_EQ(*resolve("E"), "from-env");
  EXPECT_TRUE(StatusIs(resolve("X"), absl::StatusCode::kFailedPrecondition, "DELIVERY_FAILED",
                       "secret 'X'"));
}

TEST(DeliveryFilesTest, WritesTargetsAndSnapshotInsideTheHome) {
  TempDir home;
  DeliveryPlan plan;
  plan.files = {{"cfg/deep/a.toml", "x = \"1\"\n"}, {"b.toml", "y = \"2\"\n"}};
  plan.effective_config_json = "{\"schema_version\":1,\"entries\":[]}";
  ASSERT_TRUE(IsOk(WriteDeliveredFiles(home.path(), plan)));
  EXPECT_EQ(ReadAll(home.File("cfg/deep/a.toml")), "x = \"1\"\n");
  EXPECT_EQ(ReadAll(home.File("b.toml")), "y = \"2\"\n");
  EXPECT_EQ(testing::ModeOf(home.File("cfg/deep/a.toml")), 0600u);
  EXPECT_EQ(ReadAll(home.File("effective-config.json")), plan.effective_config_json);
  EXPECT_EQ(testing::ModeOf(home.File("effective-config.json")), 0600u);

  absl::StatusOr<std::map<std::string, std::string>> existing =
      ReadExistingTargets(home.path(), {"cfg/deep/a.toml", "absent.toml"});
  ASSERT_TRUE(IsOk(existing));
  EXPECT_EQ(*existing, (std::map<std::string, std::string>{{"cfg/deep/a.toml", "x = \"1\"\n"}}));
}

ino_t InodeOf(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

TEST(DeliveryFilesTest, RewritesOnlyWhatChanged) {
  TempDir home;
  DeliveryPlan plan;
  plan.files = {{"a.toml", "x = \"1\"\n"}, {"b.toml", "y = \"2\"\n"}};
  plan.effective_config_json = "{\"schema_version\":1,\"entries\":[]}";
  ASSERT_TRUE(IsOk(WriteDeliveredFiles(home.path(), plan)));
  const ino_t a = InodeOf(home.File("a.toml"));
  const ino_t b = InodeOf(home.File("b.toml"));
  const ino_t snapshot = InodeOf(home.File("effective-config.json"));
  ASSERT_NE(a, 0u);

  // The same plan again: nothing is replaced (a rename would give each file a new inode).
  ASSERT_TRUE(IsOk(WriteDeliveredFiles(home.path(), plan)));
  EXPECT_EQ(InodeOf(home.File("a.toml")), a);
  EXPECT_EQ(InodeOf(home.File("b.toml")), b);
  EXPECT_EQ(InodeOf(home.File("effective-config.json")), snapshot);

  // Same size, other bytes (an operator's hand edit); a widened mode; new content: rewritten.
  {
    std::ofstream edit(home.File("a.toml"), std::ios::trunc);
    edit << "x = \"9\"\n";
  }
  ASSERT_EQ(chmod(home.File("b.toml").c_str(), 0644), 0);
  plan.effective_config_json = "{\"schema_version\":1,\"entries\":[1]}";
  ASSERT_TRUE(IsOk(WriteDeliveredFiles(home.path(), plan)));
  EXPECT_EQ(ReadAll(home.File("a.toml")), "x = \"1\"\n");
  EXPECT_NE(InodeOf(home.File("a.toml")), a);
  EXPECT_EQ(testing::ModeOf(home.File("b.toml")), 0600u);
  EXPECT_EQ(ReadAll(home.File("effective-config.json")), plan.effective_config_json);
}

TEST(DeliveryFilesTest, RefusesSymlinkEscapes) {
  TempDir home;
  TempDir outside;
  ASSERT_EQ(symlink(outside.path().c_str(), home.File("link").c_str()), 0);
  DeliveryPlan plan;
  plan.files = {{"link/a.toml", "x = \"1\"\n"}};
  EXPECT_TRUE(StatusIs(WriteDeliveredFiles(home.path(), plan), absl::StatusCode::kInvalidArgument,
                       reason::kConfigInvalid, "escapes the Agent Home"));
  EXPECT_FALSE(std::filesystem::exists(outside.File("a.toml")));
  EXPECT_TRUE(StatusIs(ReadExistingTargets(home.path(), {"link/a.toml"}),
                       absl::StatusCode::kInvalidArgument, reason::kConfigInvalid));
}

// The agent owns its home: a target it replaced with a FIFO (no writer: an open would block the
// daemon) or a device is refused by name, never read.
TEST(DeliveryFilesTest, RefusesATargetThatIsNotARegularFile) {
  TempDir home;
  ASSERT_EQ(mkfifo(home.File("fifo.toml").c_str(), 0600), 0);
  ASSERT_EQ(symlink("/dev/zero", home.File("zero.toml").c_str()), 0);
  EXPECT_TRUE(StatusIs(ReadExistingTargets(home.path(), {"fifo.toml"}),
                       absl::StatusCode::kInvalidArgument, reason::kIoError,
                       "fifo.toml is not a regular file"));
  EXPECT_FALSE(ReadExistingTargets(home.path(), {"zero.toml"}).ok());
  // Rendering over the FIFO replaces it with the file (atomically), without reading it.
  DeliveryPlan plan;
  plan.files = {{"fifo.toml", "x = \"1\"\n"}};
  EXPECT_TRUE(IsOk(WriteDeliveredFiles(home.path(), plan)));
  EXPECT_EQ(ReadAll(home.File("fifo.toml")), "x = \"1\"\n");
}

}  // namespace
}  // namespace ktesio::daemon::config
