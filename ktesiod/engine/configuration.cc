#include "engine/configuration.h"

#include "absl/strings/str_cat.h"
#include "config/instance_file.h"
#include "config/keys.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "supervisor/lifecycle.h"

namespace ktesio::daemon::engine {
namespace {

namespace reason = contract::reason;

absl::Status RequireTerminal(const store::InstanceRow& row, std::string_view what) {
  std::optional<supervisor::State> state = supervisor::ParseState(row.state);
  if (state.has_value() && supervisor::IsTerminal(*state)) {
    return absl::OkStatus();
  }
  return contract::MakeError(
      absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
      absl::StrCat("cannot ", std::string(what), " of '", row.name, "' while it is '", row.state,
                   "' (only when registered, stopped or failed)"));
}

// A damaged snapshot reads as empty: it only decides notices.
v1::AdapterSnapshot SnapshotOf(const store::InstanceRow& row) {
  v1::AdapterSnapshot snapshot;
  if (!snapshot.ParseFromString(row.snapshot)) {
    snapshot.Clear();
  }
  return snapshot;
}

}  // namespace

absl::StatusOr<Configuration::Written> Configuration::Set(const std::string& name,
                                                          const std::string& key,
                                                          const std::string& value) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  KT_ASSIGN_OR_RETURN(std::string stored, config::instance_file::Set(row.home, key, value));
  if (changed_) {
    changed_(name);
  }
  config::Entry entry;
  entry.key = key;
  entry.value = stored;
  entry.source = "instance";
  entry.unvalidated = config::IsPassThroughKey(key);
  entry.secret_ref = config::SecretRefName(stored).has_value();
  Written written{config::Masked({entry}).front(), {}};
  const v1::AdapterSnapshot snapshot = SnapshotOf(row);
  auto target = snapshot.config().find(key);
  if (entry.secret_ref && target != snapshot.config().end() &&
      target->second.target_case() == v1::ConfigTarget::kFlag) {
    written.notices.push_back(
        absl::StrCat("warning: '", key, "' holds a secret and is delivered as the flag ",
                     target->second.flag(), ": argv is visible to other users of this machine"));
  }
  if (key == "metering.upstream_base_url" &&
      snapshot.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
    written.notices.push_back(
        absl::StrCat("stored, but '", name, "' is metered self-reported: the value is not used"));
  }
  if (key.starts_with("budget.dollars.") && !config_.Limits(row).rate.has_value()) {
    written.notices.emplace_back(
        "dollar caps are inert until both cost.rate.input and "
        "cost.rate.output are set");
  }
  if (const std::optional<supervisor::State> state = supervisor::ParseState(row.state);
      state.has_value() && supervisor::IsLive(*state)) {
    written.notices.emplace_back(
        "the instance is live: delivered values take effect at its next start; budgets and "
        "rates apply from the next usage event");
  }
  return written;
}

absl::StatusOr<std::vector<config::Entry>> Configuration::Get(const std::string& name,
                                                              const std::string& key, bool reveal) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  if (!key.empty()) {
    if (absl::Status status = config::ValidateKey(key, config::Writer::kOperator);
        !status.ok() && contract::ErrorReason(status) == reason::kUnknownConfigKey) {
      return status;
    }
  }
  // A live engine-observed instance has its proxy URL injected (invocation-override), as at
  // its start: show it as the agent received it.
  KT_ASSIGN_OR_RETURN(std::vector<config::Entry> entries,
                      config_.Effective(row, proxy_url_(row.name)));
  std::vector<config::Entry> shown;
  for (config::Entry& entry : reveal ? entries : config::Masked(entries)) {
    if (!key.empty() && entry.key != key) {
      continue;
    }
    if (reveal && entry.secret_ref) {
      std::optional<std::string_view> secret = config::SecretRefName(entry.value);
      absl::StatusOr<std::string> value =
          config_.secrets().Resolve(std::string(*secret), config::ProcessEnvironment());
      if (!value.ok() && contract::ErrorReason(value.status()) != reason::kDeliveryFailed) {
        return value.status();  // a refused or unreadable store: not "no such secret"
      }
      entry.value = value.ok() ? *value : absl::StrCat(entry.value, " (unresolved)");
    }
    shown.push_back(std::move(entry));
  }
  if (!key.empty() && shown.empty()) {
    return contract::MakeError(
        absl::StatusCode::kNotFound, reason::kNotFound,
        absl::StrCat("'", key, "' is not set for '", name, "' and has no default"));
  }
  return shown;
}

absl::StatusOr<bool> Configuration::Unset(const std::string& name, const std::string& key) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  KT_ASSIGN_OR_RETURN(bool removed, config::instance_file::Unset(row.home, key));
  if (removed && changed_) {
    changed_(name);
  }
  return removed;
}

absl::StatusOr<bool> Configuration::SetSecret(const std::string& name, const std::string& value) {
  KT_ASSIGN_OR_RETURN(bool replaced, config_.secrets().Set(name, value));
  if (changed_) {
    changed_("");
  }
  return replaced;
}

absl::Status Configuration::RemoveSecret(const std::string& name) {
  KT_RETURN_IF_ERROR(config_.secrets().Remove(name));
  if (changed_) {
    changed_("");
  }
  return absl::OkStatus();
}

absl::StatusOr<Configuration::MemoryChange> Configuration::AttachMemory(const std::string& name,
                                                                        MemoryKind kind) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  const std::string wanted = kind == MemoryKind::kFilesystem ? "filesystem" : "native";
  KT_RETURN_IF_ERROR(RequireTerminal(row, "change the memory backing"));
  if (!row.memory_kind.empty() && row.memory_kind != wanted) {
    return contract::MakeError(
        absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
        absl::StrCat("'", row.name, "' already has a ", row.memory_kind,
                     " memory backing; detach it first (ktctl agent memory detach ", row.name,
                     ")"));
  }
  if (kind == MemoryKind::kFilesystem) {
    // Created once; never walked, copied or deleted by the engine afterwards.
    KT_RETURN_IF_ERROR(fs::MakeDirs(MemoryDir(row.home), 0700));
  }
  if (row.memory_kind != wanted) {
    row.memory_kind = wanted;
    KT_RETURN_IF_ERROR(store_.UpdateInstance(row));
  }
  MemoryChange change;
  if (kind == MemoryKind::kFilesystem && SnapshotOf(row).config().count("memory.dir") == 0) {
    change.notices.emplace_back(
        "this adapter maps no 'memory.dir': the directory exists but is "
        "delivered nowhere (declared: false)");
  }
  change.row = std::move(row);
  return change;
}

absl::StatusOr<store::InstanceRow> Configuration::DetachMemory(const std::string& name) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  KT_RETURN_IF_ERROR(RequireTerminal(row, "change the memory backing"));
  if (!row.memory_kind.empty()) {
    row.memory_kind.clear();
    KT_RETURN_IF_ERROR(store_.UpdateInstance(row));
  }
  return row;
}

}  // namespace ktesio::daemon::engine
