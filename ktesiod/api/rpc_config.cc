// The v1 edge of configuration, secrets and memory backings.

#include "api/rpc.h"
#include "config/keys.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::api::rpc {
namespace {

void FillEntry(const config::Entry& from, v1::ConfigEntry* to) {
  to->set_key(from.key);
  to->set_value(from.value);
  to->set_source(from.source);
  to->set_unvalidated(from.unvalidated);
  switch (config::JsonKindOf(from.key, from.value)) {
    case config::TomlKind::kInteger:
      to->set_value_type(v1::CONFIG_VALUE_TYPE_INTEGER);
      break;
    case config::TomlKind::kBoolean:
      to->set_value_type(v1::CONFIG_VALUE_TYPE_BOOLEAN);
      break;
    case config::TomlKind::kString:
      break;
  }
}

absl::StatusOr<engine::Configuration::MemoryKind> MemoryKindOf(v1::MemoryKind kind) {
  switch (kind) {
    case v1::MEMORY_KIND_FILESYSTEM:
      return engine::Configuration::MemoryKind::kFilesystem;
    case v1::MEMORY_KIND_NATIVE:
      return engine::Configuration::MemoryKind::kNative;
    default:
      return contract::MakeError(absl::StatusCode::kInvalidArgument, "UNKNOWN_MEMORY_KIND",
                                 "unknown memory kind (filesystem | native)");
  }
}

}  // namespace

absl::Status SetConfig(engine::Engine& engine, const v1::SetConfigRequest& request,
                       v1::SetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(engine::Configuration::Written written,
                      engine.configuration().Set(request.name(), request.key(), request.value()));
  FillEntry(written.entry, response->mutable_entry());
  response->mutable_notices()->Add(written.notices.begin(), written.notices.end());
  return absl::OkStatus();
}

absl::Status GetConfig(engine::Engine& engine, const v1::GetConfigRequest& request,
                       v1::GetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(std::vector<config::Entry> entries,
                      engine.configuration().Get(request.name(), request.key(), request.reveal()));
  for (const config::Entry& entry : entries) {
    FillEntry(entry, response->add_entries());
  }
  return absl::OkStatus();
}

absl::Status UnsetConfig(engine::Engine& engine, const v1::UnsetConfigRequest& request,
                         v1::UnsetConfigResponse* response) {
  KT_ASSIGN_OR_RETURN(bool removed, engine.configuration().Unset(request.name(), request.key()));
  response->set_removed(removed);
  return absl::OkStatus();
}

absl::Status SetSecret(engine::Engine& engine, const v1::SetSecretRequest& request,
                       v1::SetSecretResponse* response) {
  KT_ASSIGN_OR_RETURN(bool replaced,
                      engine.configuration().SetSecret(request.name(), request.value()));
  response->set_name(request.name());
  response->set_replaced(replaced);
  return absl::OkStatus();
}

absl::Status ListSecrets(engine::Engine& engine, v1::ListSecretsResponse* response) {
  KT_ASSIGN_OR_RETURN(std::vector<std::string> names, engine.configuration().secrets().List());
  for (std::string& name : names) {
    response->add_names(std::move(name));
  }
  return absl::OkStatus();
}

absl::Status RemoveSecret(engine::Engine& engine, const v1::RemoveSecretRequest& request,
                          v1::RemoveSecretResponse* response) {
  KT_RETURN_IF_ERROR(engine.configuration().RemoveSecret(request.name()));
  response->set_name(request.name());
  return absl::OkStatus();
}

absl::Status AttachMemory(engine::Engine& engine, const v1::AttachMemoryRequest& request,
                          v1::AttachMemoryResponse* response) {
  KT_RETURN_IF_ERROR(engine.instances().Find(request.name()).status());  // NOT_FOUND first
  KT_ASSIGN_OR_RETURN(engine::Configuration::MemoryKind kind, MemoryKindOf(request.kind()));
  KT_ASSIGN_OR_RETURN(engine::Configuration::MemoryChange change,
                      engine.configuration().AttachMemory(request.name(), kind));
  response->set_name(change.row.name);
  *response->mutable_memory() = engine.instances().View(change.row).memory();
  response->mutable_notices()->Add(change.notices.begin(), change.notices.end());
  return absl::OkStatus();
}

absl::Status DetachMemory(engine::Engine& engine, const v1::DetachMemoryRequest& request,
                          v1::DetachMemoryResponse* response) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, engine.configuration().DetachMemory(request.name()));
  response->set_name(row.name);
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::api::rpc
