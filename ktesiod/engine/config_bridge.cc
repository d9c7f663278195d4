#include "engine/config_bridge.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/delivery.h"
#include "config/delivery_files.h"
#include "config/instance_file.h"
#include "config/money.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "registry/snapshot.h"
#include "supervisor/restart_policy.h"

namespace ktesio::daemon::engine {
namespace {

int64_t Number(const std::vector<config::Entry>& entries, std::string_view key, int64_t fallback) {
  std::optional<std::string> value = config::Lookup(entries, key);
  int64_t parsed = 0;
  if (value.has_value() && absl::SimpleAtoi(*value, &parsed)) {
    return parsed;
  }
  return fallback;
}

}  // namespace

std::string MemoryDir(const std::string& home) { return home + "/memory"; }

absl::StatusOr<std::map<std::string, std::string>> ConfigBridge::LoadInstanceFile(
    const std::string& home) const {
  struct stat st {};
  if (stat(config::instance_file::PathIn(home).c_str(), &st) != 0) {
    instance_files_.erase(home);
    return config::instance_file::Load(home);  // missing (an empty layer) or unreadable
  }
  auto it = instance_files_.find(home);
  if (it != instance_files_.end() && it->second.device == st.st_dev &&
      it->second.inode == st.st_ino && it->second.size == st.st_size &&
      it->second.modified.tv_sec == st.st_mtim.tv_sec &&
      it->second.modified.tv_nsec == st.st_mtim.tv_nsec) {
    return it->second.values;
  }
  absl::StatusOr<std::map<std::string, std::string>> loaded = config::instance_file::Load(home);
  if (!loaded.ok()) {
    instance_files_.erase(home);
    return loaded;
  }
  // Stamped with the stat taken before the read: a change meanwhile is seen at the next call.
  instance_files_[home] = CachedFile{st.st_dev, st.st_ino, st.st_size, st.st_mtim, *loaded};
  return loaded;
}

absl::StatusOr<std::vector<config::Entry>> ConfigBridge::Effective(
    const store::InstanceRow& row, const std::string& metering_base_url) const {
  config::Layers layers;
  absl::StatusOr<std::map<std::string, std::string>> instance = LoadInstanceFile(row.home);
  if (!instance.ok()) {
    return instance.status();
  }
  layers.instance = std::move(*instance);
  if (row.memory_kind == "filesystem") {
    layers.invocation_override["memory.dir"] = MemoryDir(row.home);
  }
  if (!metering_base_url.empty()) {
    layers.invocation_override["metering.base_url"] = metering_base_url;
  }
  return config::Effective(layers);
}

supervisor::InstanceSettings ConfigBridge::Settings(const store::InstanceRow& row) const {
  supervisor::InstanceSettings settings;
  absl::StatusOr<std::vector<config::Entry>> entries = Effective(row);
  if (!entries.ok()) {
    return settings;
  }
  supervisor::RestartSettings& restart = settings.restart;
  if (std::optional<std::string> policy = config::Lookup(*entries, "restart.policy")) {
    restart.policy = supervisor::ParseRestartPolicy(*policy).value_or(restart.policy);
  }
  restart.backoff_initial_ms =
      Number(*entries, "restart.backoff_initial_ms", restart.backoff_initial_ms);
  restart.backoff_max_ms = Number(*entries, "restart.backoff_max_ms", restart.backoff_max_ms);
  restart.max_consecutive = Number(*entries, "restart.max_consecutive", restart.max_consecutive);
  restart.reset_after_ms = Number(*entries, "restart.reset_after_ms", restart.reset_after_ms);
  settings.log_max_bytes =
      static_cast<uint64_t>(Number(*entries, "logs.max_bytes", settings.log_max_bytes));
  settings.log_keep = static_cast<uint32_t>(Number(*entries, "logs.keep", settings.log_keep));
  settings.autostart = config::Lookup(*entries, "autostart").value_or("false") == "true";
  return settings;
}

budget::Limits ConfigBridge::Limits(const store::InstanceRow& row) const {
  budget::Limits limits;
  absl::StatusOr<std::vector<config::Entry>> entries = Effective(row);
  if (!entries.ok()) {
    return limits;
  }
  auto tokens = [&](std::string_view key) -> std::optional<uint64_t> {
    std::optional<std::string> value = config::Lookup(*entries, key);
    uint64_t parsed = 0;
    if (value.has_value() && absl::SimpleAtoi(*value, &parsed)) {
      return parsed;
    }
    return std::nullopt;
  };
  auto dollars = [&](std::string_view key) -> std::optional<int64_t> {
    std::optional<std::string> value = config::Lookup(*entries, key);
    if (!value.has_value()) {
      return std::nullopt;
    }
    absl::StatusOr<int64_t> micros = config::ParseMicroDollars(*value);
    return micros.ok() ? std::optional<int64_t>(*micros) : std::nullopt;
  };
  limits.tokens_per_run = tokens("budget.tokens.per_run");
  limits.tokens_cumulative = tokens("budget.tokens.cumulative");
  limits.dollars_per_run = dollars("budget.dollars.per_run");
  limits.dollars_cumulative = dollars("budget.dollars.cumulative");
  std::optional<int64_t> input = dollars("cost.rate.input");
  std::optional<int64_t> output = dollars("cost.rate.output");
  if (input.has_value() && output.has_value()) {
    limits.rate = budget::Rate{*input, *output};
  }
  const std::string action = config::Lookup(*entries, "budget.breach_action").value_or("pause");
  limits.action = action == "stop"   ? budget::Action::kStop
                  : action == "warn" ? budget::Action::kWarn
                                     : budget::Action::kPause;
  return limits;
}

absl::StatusOr<config::DeliveryPlan> ConfigBridge::Plan(
    const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot,
    const std::string& metering_base_url) const {
  KT_ASSIGN_OR_RETURN(std::vector<config::Entry> entries, Effective(row, metering_base_url));
  config::DeliveryInput input = config::InputFor(
      registry::FromSnapshot(snapshot), std::move(entries), supervisor::SafeBaseEnvironment());
  KT_ASSIGN_OR_RETURN(auto existing,
                      config::ReadExistingTargets(row.home, config::FileTargetPaths(input)));
  input.existing_files = std::move(existing);
  return config::PlanDelivery(input, config::StoreResolver(secrets_, config::ProcessEnvironment()));
}

absl::StatusOr<supervisor::Delivery> ConfigBridge::Deliver(
    const store::InstanceRow& row, const v1::AdapterSnapshot& snapshot,
    const std::string& metering_base_url) const {
  KT_ASSIGN_OR_RETURN(config::DeliveryPlan plan, Plan(row, snapshot, metering_base_url));
  KT_RETURN_IF_ERROR(config::WriteDeliveredFiles(row.home, plan));
  supervisor::Delivery delivery;
  for (const auto& [key, value] : plan.env) {
    delivery.env.emplace_back(key, value);
  }
  delivery.extra_args = plan.argv_tail;
  for (const config::Notice& notice : plan.notices) {
    delivery.notices.push_back(absl::StrCat(
        notice.level == config::Notice::Level::kWarning ? "warning: " : "", notice.message));
  }
  return delivery;
}

}  // namespace ktesio::daemon::engine
