// The engine owners that API calls and fleet operations speak to by instance name — Instances
// (registration limit, labels, selectors, views), Configuration (config edits and their notices,
// revealing secrets, memory backings) and Lifecycle (removal rules, the fleet stop, one-line
// sends) — over a real store, registry and supervisor, with the fake process backend and clock:
// no process, no sleep.

#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "engine/configuration.h"
#include "engine/instances.h"
#include "engine/lifecycle.h"
#include "engine/view.h"
#include "engine_owner_fixture.h"
#include "fakes/fake_process_backend.h"
#include "gtest/gtest.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/limits.h"
#include "spdlog/sinks/null_sink.h"
#include "status_assertions.h"

namespace ktesio::daemon::engine {
namespace {

namespace reason = contract::reason;

class InstanceOwnersTest : public EngineOwnerTest {
 protected:
  void SetUp() override {
    EngineOwnerTest::SetUp();
    registry_ =
        std::make_unique<registry::Registry>(*store_, dir_, [this] { return clock_.NowUnixMs(); });
    supervisor::Hooks hooks;
    hooks.settings = [this](const store::InstanceRow& row) { return config_->Settings(row); };
    supervisor_ = std::make_unique<supervisor::Supervisor>(
        io_, *store_, backend_, clock_,
        std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_st>()),
        hooks);
    instances_ = std::make_unique<Instances>(
        Context(), *registry_,
        Instances::Hooks{
            [](const std::string& name) { return "http://proxy/" + name; },
            [this](const store::InstanceRow&, v1::AgentInstance*) { ++resource_reads_; }});
    configuration_ = std::make_unique<Configuration>(
        *store_, *config_, *registry_, [](const std::string&) { return std::string(); });
    lifecycle_ = std::make_unique<Lifecycle>(
        *store_, *registry_, *supervisor_,
        Lifecycle::Hooks{[this](const std::string& name) { forgotten_.push_back(name); }});
  }
  void TearDown() override {
    lifecycle_.reset();
    configuration_.reset();
    instances_.reset();
    supervisor_.reset();
    registry_.reset();
    EngineOwnerTest::TearDown();
  }

  store::InstanceRow Register(const std::string& name, uint64_t limit = 100) {
    v1::RegisterAgentRequest request;
    request.set_name(name);
    request.set_builtin_kind("mock");
    absl::StatusOr<store::InstanceRow> row = instances_->Register(request, limit);
    EXPECT_TRUE(row.ok()) << row.status();
    return row.value_or(store::InstanceRow{});
  }
  void SetState(const std::string& name, const std::string& state) {
    store::InstanceRow row = instances_->Find(name).value();
    row.state = state;
    KT_ASSERT_OK(store_->UpdateInstance(row));
  }
  void Settle() {
    io_.restart();
    io_.poll();
  }

  boost::asio::io_context io_;
  testing::FakeProcessBackend backend_{io_};
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<supervisor::Supervisor> supervisor_;
  std::unique_ptr<Instances> instances_;
  std::unique_ptr<Configuration> configuration_;
  std::unique_ptr<Lifecycle> lifecycle_;
  int resource_reads_ = 0;
  std::vector<std::string> forgotten_;
};

// --- Instances ---

// The fleet's token sums saturate at 2^63 - 1, as each instance's do: never past what a JSON
// reader holds in an int64, never wrapped.
TEST(FleetTotalsTest, TokenSumsSaturateAtTheLargestInt64) {
  google::protobuf::RepeatedPtrField<v1::AgentInstance> instances;
  for (uint64_t input : {uint64_t{INT64_MAX}, uint64_t{212}, ~uint64_t{0}}) {
    v1::AgentInstance* instance = instances.Add();
    instance->mutable_usage()->set_cumulative_input_tokens(input);
    instance->mutable_usage()->set_cumulative_output_tokens(3);
  }
  const v1::FleetTotals totals = BuildFleetTotals(instances);
  EXPECT_EQ(totals.total_input_tokens(), uint64_t{INT64_MAX});
  EXPECT_EQ(totals.total_output_tokens(), 9U);
  instances.RemoveLast();
  instances.RemoveLast();
  EXPECT_EQ(BuildFleetTotals(instances).total_input_tokens(), uint64_t{INT64_MAX});
}

TEST_F(InstanceOwnersTest, RegisterRefusesAtTheLimitAndWritesNothing) {
  Register("a", 2);
  Register("b", 2);
  v1::RegisterAgentRequest request;
  request.set_name("c");
  request.set_builtin_kind("mock");
  absl::StatusOr<store::InstanceRow> refused = instances_->Register(request, 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(contract::ErrorReason(refused.status()), reason::kLimitReached);
  EXPECT_EQ(store_->CountInstances().value(), 2);
  EXPECT_FALSE(std::filesystem::exists(registry::AgentHomePath(dir_, "c")));
}

TEST_F(InstanceOwnersTest, LabelEditsRemoveThenSetAndReportWhetherAnythingChanged) {
  Register("a");
  Instances::LabelEdit edit;
  edit.set = {{"team", "red"}, {"tier", "1"}};
  absl::StatusOr<Instances::Labelled> first = instances_->Label("a", edit);
  KT_ASSERT_OK(first.status());
  EXPECT_TRUE(first->changed);
  EXPECT_EQ(first->labels.size(), 2U);

  Instances::LabelEdit again;
  again.set = {{"team", "red"}};
  EXPECT_FALSE(instances_->Label("a", again).value().changed);

  Instances::LabelEdit swap;
  swap.remove = {"tier"};
  swap.set = {{"team", "blue"}};
  absl::StatusOr<Instances::Labelled> swapped = instances_->Label("a", swap);
  KT_ASSERT_OK(swapped.status());
  EXPECT_EQ(swapped->labels, (store::Store::Labels{{"team", "blue"}}));
  EXPECT_EQ(store_->GetLabels(swapped->row.id).value(), swapped->labels);
}

TEST_F(InstanceOwnersTest, OperatorsCannotTouchReservedLabelsButTheFleetOwnerCan) {
  Register("a");
  Instances::LabelEdit edit;
  edit.set = {{"team", "red"}, {"ktesio.io/fleet", "mine"}};
  absl::StatusOr<Instances::Labelled> refused = instances_->Label("a", edit);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(contract::ErrorReason(refused.status()), reason::kInvalidLabel);
  const store::InstanceRow row = instances_->Find("a").value();
  EXPECT_TRUE(store_->GetLabels(row.id).value().empty());  // nothing of the edit applied

  KT_ASSERT_OK(instances_->SetLabels("a", {{"ktesio.io/fleet", "mine"}}));
  EXPECT_EQ(store_->GetLabels(row.id).value().at("ktesio.io/fleet"), "mine");
  EXPECT_EQ(contract::ErrorReason(instances_->SetLabels("ghost", {})), reason::kNotFound);
}

TEST_F(InstanceOwnersTest, ListFiltersBySelectorAndViewsCarryLabelsAndTheProxyUrl) {
  Register("a");
  Register("b");
  KT_ASSERT_OK(instances_->SetLabels("b", {{"team", "red"}}));
  absl::StatusOr<contract::Selector> selector = contract::Selector::Parse("team=red");
  KT_ASSERT_OK(selector.status());
  absl::StatusOr<std::vector<Instances::Listed>> listed = instances_->List(&*selector);
  KT_ASSERT_OK(listed.status());
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ(listed->front().row.name, "b");
  EXPECT_EQ(instances_->List().value().size(), 2U);

  v1::ListAgentsResponse views;
  instances_->Views(*listed, false, &views);
  ASSERT_EQ(views.instances_size(), 1);
  EXPECT_EQ(views.instances(0).labels().at("team"), "red");
  EXPECT_EQ(views.instances(0).proxy_url(), "http://proxy/b");
  EXPECT_EQ(views.instances(0).restart_policy(), v1::RESTART_POLICY_ON_FAILURE);
  EXPECT_TRUE(views.has_totals());
  EXPECT_EQ(resource_reads_, 0);  // /proc only when asked
  KT_ASSERT_OK(instances_->View("a", true).status());
  EXPECT_EQ(resource_reads_, 1);
  EXPECT_EQ(contract::ErrorReason(instances_->View("ghost").status()), reason::kNotFound);
}

// --- Configuration ---

TEST_F(InstanceOwnersTest, SetWarnsWhatAValueWillNotDo) {
  Register("a");  // mock meters self-reported, has no Rate
  absl::StatusOr<Configuration::Written> upstream =
      configuration_->Set("a", "metering.upstream_base_url", "http://127.0.0.1:9/v1");
  KT_ASSERT_OK(upstream.status());
  EXPECT_EQ(upstream->entry.source, "instance");
  ASSERT_EQ(upstream->notices.size(), 1U);
  EXPECT_NE(upstream->notices[0].find("metered self-reported"), std::string::npos);

  absl::StatusOr<Configuration::Written> dollars =
      configuration_->Set("a", "budget.dollars.cumulative", "5.00");
  KT_ASSERT_OK(dollars.status());
  ASSERT_EQ(dollars->notices.size(), 1U);
  EXPECT_NE(dollars->notices[0].find("inert"), std::string::npos);

  SetState("a", "running");
  absl::StatusOr<Configuration::Written> live = configuration_->Set("a", "logs.keep", "4");
  KT_ASSERT_OK(live.status());
  ASSERT_EQ(live->notices.size(), 1U);
  EXPECT_NE(live->notices[0].find("next start"), std::string::npos);

  EXPECT_FALSE(configuration_->Set("a", "no.such.key", "1").ok());
  EXPECT_FALSE(configuration_->Set("a", "logs.keep", "zero").ok());
}

TEST_F(InstanceOwnersTest, GetMasksSecretsUnlessRevealedAndNamesMissingKeys) {
  Register("a");
  KT_ASSERT_OK(configuration_->secrets().Set("TOKEN", "s3cret").status());
  absl::StatusOr<Configuration::Written> written =
      configuration_->Set("a", "agent.API_TOKEN", "secret:TOKEN");
  KT_ASSERT_OK(written.status());
  EXPECT_EQ(written->entry.value, "secret:****");
  KT_ASSERT_OK(configuration_->Set("a", "agent.OTHER", "secret:MISSING_KT_SECRET").status());

  absl::StatusOr<std::vector<config::Entry>> masked =
      configuration_->Get("a", "agent.API_TOKEN", false);
  KT_ASSERT_OK(masked.status());
  ASSERT_EQ(masked->size(), 1U);
  EXPECT_EQ(masked->front().value, "secret:****");
  EXPECT_EQ(configuration_->Get("a", "agent.API_TOKEN", true).value().front().value, "s3cret");
  EXPECT_EQ(configuration_->Get("a", "agent.OTHER", true).value().front().value,
            "secret:MISSING_KT_SECRET (unresolved)");
  // Defaults show; an unset key without a default is NOT_FOUND.
  EXPECT_EQ(configuration_->Get("a", "logs.keep", false).value().front().source, "engine-default");
  EXPECT_EQ(contract::ErrorReason(configuration_->Get("a", "agent.NOPE", false).status()),
            reason::kNotFound);
  EXPECT_TRUE(configuration_->Unset("a", "agent.OTHER").value());
  EXPECT_FALSE(configuration_->Unset("a", "agent.OTHER").value());
  // A store refused for its mode is that error, with its fix, not a secret said to be missing.
  ASSERT_EQ(chmod(configuration_->secrets().path().c_str(), 0644), 0);
  absl::StatusOr<std::vector<config::Entry>> refused =
      configuration_->Get("a", "agent.API_TOKEN", true);
  EXPECT_EQ(contract::ErrorReason(refused.status()), reason::kPermissionDenied) << refused.status();
  EXPECT_NE(refused.status().message().find("chmod 600"), std::string_view::npos)
      << refused.status();
  KT_ASSERT_OK(configuration_->Get("a", "agent.API_TOKEN", false).status());  // masked: no read
}

TEST_F(InstanceOwnersTest, MemoryBackingsChangeOnlyWhileStoppedAndOneKindAtATime) {
  const store::InstanceRow row = Register("a");
  absl::StatusOr<Configuration::MemoryChange> attached =
      configuration_->AttachMemory("a", Configuration::MemoryKind::kFilesystem);
  KT_ASSERT_OK(attached.status());
  EXPECT_EQ(attached->row.memory_kind, "filesystem");
  EXPECT_TRUE(std::filesystem::is_directory(MemoryDir(row.home)));
  EXPECT_EQ(instances_->View("a").value().memory().kind(), v1::MEMORY_KIND_FILESYSTEM);

  absl::StatusOr<Configuration::MemoryChange> other =
      configuration_->AttachMemory("a", Configuration::MemoryKind::kNative);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(contract::ErrorReason(other.status()), reason::kInvalidState);

  SetState("a", "running");
  EXPECT_EQ(contract::ErrorReason(configuration_->DetachMemory("a").status()),
            reason::kInvalidState);
  EXPECT_EQ(instances_->Find("a").value().memory_kind, "filesystem");

  SetState("a", "stopped");
  KT_ASSERT_OK(configuration_->DetachMemory("a").status());
  EXPECT_TRUE(instances_->Find("a").value().memory_kind.empty());
  EXPECT_TRUE(std::filesystem::is_directory(MemoryDir(row.home)));  // the bytes stay
}

// --- Lifecycle ---

TEST_F(InstanceOwnersTest, RemoveRefusesALiveInstanceWithoutForceAndForgetsARemovedOne) {
  Register("a");
  SetState("a", "running");
  std::optional<absl::StatusOr<store::InstanceRow>> refused;
  lifecycle_->Remove("a", {}, [&](absl::StatusOr<store::InstanceRow> row) { refused = row; });
  Settle();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(contract::ErrorReason(refused->status()), reason::kInvalidState);
  EXPECT_TRUE(instances_->Find("a").ok());
  EXPECT_TRUE(forgotten_.empty());

  SetState("a", "stopped");
  std::optional<absl::StatusOr<store::InstanceRow>> removed;
  lifecycle_->Remove("a", {.force = false, .delete_home = true},
                     [&](absl::StatusOr<store::InstanceRow> row) { removed = row; });
  Settle();
  ASSERT_TRUE(removed.has_value());
  KT_ASSERT_OK(removed->status());
  EXPECT_FALSE(std::filesystem::exists((*removed)->home));
  EXPECT_EQ(contract::ErrorReason(instances_->Find("a").status()), reason::kNotFound);
  EXPECT_EQ(forgotten_, std::vector<std::string>{"a"});
}

TEST_F(InstanceOwnersTest, StopAllLeavesTransitionsAloneWithANotice) {
  Register("a");
  Register("b");
  SetState("b", "starting");
  std::optional<absl::StatusOr<Lifecycle::StopAllOutcome>> outcome;
  lifecycle_->StopAll(std::nullopt,
                      [&](absl::StatusOr<Lifecycle::StopAllOutcome> got) { outcome = got; });
  Settle();
  ASSERT_TRUE(outcome.has_value());
  KT_ASSERT_OK(outcome->status());
  EXPECT_TRUE((*outcome)->acted.empty());
  ASSERT_EQ((*outcome)->notices.size(), 1U);
  EXPECT_EQ((*outcome)->notices[0], "b: 'starting', left to finish that transition; not stopped");
}

// A fleet stop reaching a daemon that is shutting down is answered as one stop would be
// (SHUTTING_DOWN, ktctl exit 7), not as a stop carried out.
TEST_F(InstanceOwnersTest, StopAllDuringShutdownIsAnsweredShuttingDown) {
  Register("a");
  SetState("a", "running");
  supervisor_->AnswerWaitersAtShutdown();
  std::optional<absl::StatusOr<Lifecycle::StopAllOutcome>> outcome;
  lifecycle_->StopAll(std::nullopt,
                      [&](absl::StatusOr<Lifecycle::StopAllOutcome> got) { outcome = got; });
  Settle();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(contract::ErrorReason(outcome->status()), reason::kShuttingDown);
  EXPECT_EQ(instances_->Find("a")->state, "running");
}

TEST_F(InstanceOwnersTest, SendTakesOneLine) {
  Register("a");
  using Sent = supervisor::Supervisor::Sent;
  std::optional<absl::StatusOr<Sent>> sent;
  lifecycle_->Send("a", "two\nlines", [&](absl::StatusOr<Sent> written) { sent = written; });
  Settle();
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->status().code(), absl::StatusCode::kInvalidArgument);
  // Of at most kMaxSendBytes (a raw API call could send up to the transport's limit).
  sent.reset();
  lifecycle_->Send("a", std::string(contract::kMaxSendBytes + 1, 'x'),
                   [&](absl::StatusOr<Sent> written) { sent = written; });
  Settle();
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sent->status().message().find("at most 1048576 bytes"), std::string_view::npos)
      << sent->status();
}

}  // namespace
}  // namespace ktesio::daemon::engine
