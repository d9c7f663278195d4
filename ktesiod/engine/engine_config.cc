// The engine's configuration, secrets and memory-backing operations.

#include "absl/strings/str_cat.h"
#include "config/instance_file.h"
#include "config/keys.h"
#include "engine/engine.h"
#include "fs/fs.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "supervisor/lifecycle.h"

namespace ktesio::daemon::engine {
namespace {

namespace reason = contract::reason;

void FillEntry(const config::Entry& from, v1::ConfigEntry* to) {
  to->set_key(from.key);
  to->set_value(from.value);
  to->set_source(from.source);
  to->set_unvalidated(from.unvalidated);
}

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

}  // namespace

absl::Status Engine::SetConfig(const v1::SetConfigRequest& request,
                               v1::SetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  absl::StatusOr<std::string> stored =
      config::instance_file::Set(row.home, request.key(), request.value());
  if (!stored.ok()) {
    return stored.status();
  }
  config::Entry entry;
  entry.key = request.key();
  entry.value = *stored;
  entry.source = "instance";
  entry.unvalidated = config::IsPassThroughKey(request.key());
  entry.secret_ref = config::SecretRefName(*stored).has_value();
  FillEntry(config::Masked({entry}).front(), response->mutable_entry());
  v1::AdapterSnapshot snapshot;
  if (!snapshot.ParseFromString(row.snapshot)) {
    snapshot.Clear();  // only decides a warning notice; a damaged snapshot shows no notice
  }
  auto target = snapshot.config().find(request.key());
  if (entry.secret_ref && target != snapshot.config().end() &&
      target->second.target_case() == v1::ConfigTarget::kFlag) {
    response->add_notices(
        absl::StrCat("warning: '", request.key(), "' holds a secret and is delivered as the flag ",
                     target->second.flag(), ": argv is visible to other users of this machine"));
  }
  if (request.key() == "metering.upstream_base_url" &&
      snapshot.metering_source() != v1::METERING_SOURCE_ENGINE_OBSERVED) {
    response->add_notices(absl::StrCat("stored, but '", request.name(),
                                       "' is metered self-reported: the value is not used"));
  }
  if (request.key().rfind("budget.dollars.", 0) == 0 && !config_.Limits(row).rate.has_value()) {
    response->add_notices(
        "dollar caps are inert until both cost.rate.input and "
        "cost.rate.output are set");
  }
  if (const std::optional<supervisor::State> state = supervisor::ParseState(row.state);
      state.has_value() && supervisor::IsLive(*state)) {
    response->add_notices(
        "the instance is live: delivered values take effect at its next start; budgets and "
        "rates apply from the next usage event");
  }
  return absl::OkStatus();
}

absl::Status Engine::GetConfig(const v1::GetConfigRequest& request,
                               v1::GetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  if (!request.key().empty()) {
    if (absl::Status status = config::ValidateKey(request.key(), config::Writer::kOperator);
        !status.ok() && contract::ErrorReason(status) == reason::kUnknownConfigKey) {
      return status;
    }
  }
  // A live engine-observed instance has its proxy URL injected (invocation-override), as at
  // its start: show it as the agent received it.
  KT_ASSIGN_OR_RETURN(std::vector<config::Entry> entries,
                      config_.Effective(row, ProxyUrl(row.name)));
  std::vector<config::Entry> shown = request.reveal() ? entries : config::Masked(entries);
  for (const config::Entry& entry : shown) {
    if (!request.key().empty() && entry.key != request.key()) {
      continue;
    }
    v1::ConfigEntry* out = response->add_entries();
    FillEntry(entry, out);
    if (request.reveal() && entry.secret_ref) {
      std::optional<std::string_view> name = config::SecretRefName(entry.value);
      absl::StatusOr<std::string> value =
          config_.secrets().Resolve(std::string(*name), config::ProcessEnvironment());
      out->set_value(value.ok() ? *value : absl::StrCat(entry.value, " (unresolved)"));
    }
  }
  if (!request.key().empty() && response->entries().empty()) {
    return contract::MakeError(absl::StatusCode::kNotFound, reason::kNotFound,
                               absl::StrCat("'", request.key(), "' is not set for '",
                                            request.name(), "' and has no default"));
  }
  return absl::OkStatus();
}

absl::Status Engine::UnsetConfig(const v1::UnsetConfigRequest& request,
                                 v1::UnsetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  KT_ASSIGN_OR_RETURN(bool removed, config::instance_file::Unset(row.home, request.key()));
  response->set_removed(removed);
  return absl::OkStatus();
}

absl::Status Engine::SetSecret(const v1::SetSecretRequest& request,
                               v1::SetSecretResponse* response) {
  KT_ASSIGN_OR_RETURN(bool replaced, config_.secrets().Set(request.name(), request.value()));
  response->set_name(request.name());
  response->set_replaced(replaced);
  return absl::OkStatus();
}

absl::Status Engine::ListSecrets(v1::ListSecretsResponse* response) {
  KT_ASSIGN_OR_RETURN(std::vector<std::string> names, config_.secrets().List());
  for (std::string& name : names) {
    response->add_names(std::move(name));
  }
  return absl::OkStatus();
}

absl::Status Engine::RemoveSecret(const v1::RemoveSecretRequest& request,
                                  v1::RemoveSecretResponse* response) {
  KT_RETURN_IF_ERROR(config_.secrets().Remove(request.name()));
  response->set_name(request.name());
  return absl::OkStatus();
}

absl::Status Engine::AttachMemory(const v1::AttachMemoryRequest& request,
                                  v1::AttachMemoryResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  std::string kind;
  if (request.kind() == v1::MEMORY_KIND_FILESYSTEM) {
    kind = "filesystem";
  } else if (request.kind() == v1::MEMORY_KIND_NATIVE) {
    kind = "native";
  } else {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, "UNKNOWN_MEMORY_KIND",
                               "unknown memory kind (filesystem | native)");
  }
  KT_RETURN_IF_ERROR(RequireTerminal(row, "change the memory backing"));
  if (!row.memory_kind.empty() && row.memory_kind != kind) {
    return contract::MakeError(
        absl::StatusCode::kFailedPrecondition, reason::kInvalidState,
        absl::StrCat("'", row.name, "' already has a ", row.memory_kind,
                     " memory backing; detach it first (ktctl agent memory detach ", row.name,
                     ")"));
  }
  if (kind == "filesystem") {
    // Created once; never walked, copied or deleted by the engine afterwards.
    KT_RETURN_IF_ERROR(fs::MakeDirs(MemoryDir(row.home), 0700));
  }
  if (row.memory_kind != kind) {
    row.memory_kind = kind;
    KT_RETURN_IF_ERROR(store_->UpdateInstance(row));
  }
  v1::AgentInstance view = View(row);
  response->set_name(row.name);
  *response->mutable_memory() = view.memory();
  if (kind == "filesystem" && !view.memory().declared()) {
    response->add_notices(
        "this adapter maps no 'memory.dir': the directory exists but is "
        "delivered nowhere (declared: false)");
  }
  return absl::OkStatus();
}

absl::Status Engine::DetachMemory(const v1::DetachMemoryRequest& request,
                                  v1::DetachMemoryResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(request.name()));
  KT_RETURN_IF_ERROR(RequireTerminal(row, "change the memory backing"));
  // Metadata only: the memory/ directory and its bytes stay where they are.
  if (!row.memory_kind.empty()) {
    row.memory_kind.clear();
    KT_RETURN_IF_ERROR(store_->UpdateInstance(row));
  }
  response->set_name(row.name);
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
