#include "engine/instances.h"

#include "absl/strings/str_cat.h"
#include "engine/usage_meter.h"
#include "engine/view.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::engine {
namespace {

v1::RestartPolicy PolicyOf(supervisor::RestartPolicyKind kind) {
  switch (kind) {
    case supervisor::RestartPolicyKind::kNever:
      return v1::RESTART_POLICY_NEVER;
    case supervisor::RestartPolicyKind::kOnFailure:
      return v1::RESTART_POLICY_ON_FAILURE;
    case supervisor::RestartPolicyKind::kAlways:
      return v1::RESTART_POLICY_ALWAYS;
  }
  return v1::RESTART_POLICY_UNSPECIFIED;
}

void FillMemory(const store::InstanceRow& row, v1::AgentInstance* view) {
  if (row.memory_kind.empty()) {
    return;
  }
  v1::MemoryBacking* memory = view->mutable_memory();
  const bool filesystem = row.memory_kind == "filesystem";
  memory->set_kind(filesystem ? v1::MEMORY_KIND_FILESYSTEM : v1::MEMORY_KIND_NATIVE);
  memory->set_guarantee(filesystem ? v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE
                                   : v1::MEMORY_GUARANTEE_HOME_PERSISTENCE_ONLY);
  if (filesystem) {
    memory->set_dir(MemoryDir(row.home));
  }
  memory->set_declared(view->adapter().config().count("memory.dir") != 0);
}

}  // namespace

absl::StatusOr<store::InstanceRow> Instances::Register(const v1::RegisterAgentRequest& request,
                                                       uint64_t max_instances) {
  KT_ASSIGN_OR_RETURN(int64_t count, owners_.store->CountInstances());
  if (static_cast<uint64_t>(count) >= max_instances) {
    return contract::MakeError(
        absl::StatusCode::kResourceExhausted, contract::reason::kLimitReached,
        absl::StrCat("the daemon already has ", count,
                     " Agent Instances (max_instances in ktesiod.toml); remove one or raise it"));
  }
  return registry_.Register(request);
}

absl::StatusOr<std::vector<Instances::Listed>> Instances::List(const contract::Selector* selector) {
  KT_ASSIGN_OR_RETURN(std::vector<store::InstanceRow> rows, owners_.store->ListInstances());
  KT_ASSIGN_OR_RETURN(auto labels, owners_.store->AllLabels());
  std::vector<Listed> listed;
  listed.reserve(rows.size());
  for (store::InstanceRow& row : rows) {
    Listed item;
    if (auto found = labels.find(row.id); found != labels.end()) {
      item.labels = std::move(found->second);
    }
    if (selector != nullptr && !selector->Matches(item.labels)) {
      continue;
    }
    item.row = std::move(row);
    listed.push_back(std::move(item));
  }
  return listed;
}

absl::StatusOr<Instances::Labelled> Instances::Label(const std::string& name,
                                                     const LabelEdit& edit) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  for (const auto& [key, value] : edit.set) {
    KT_RETURN_IF_ERROR(CheckOperatorLabel(key));
    KT_RETURN_IF_ERROR(contract::ValidateLabelValue(key, value));
  }
  for (const std::string& key : edit.remove) {
    KT_RETURN_IF_ERROR(CheckOperatorLabel(key));
  }
  KT_ASSIGN_OR_RETURN(store::Store::Labels before, owners_.store->GetLabels(row.id));
  Labelled result;
  result.labels = before;
  for (const std::string& key : edit.remove) {
    result.labels.erase(key);
  }
  for (const auto& [key, value] : edit.set) {
    result.labels[key] = value;
  }
  result.changed = result.labels != before;
  if (result.changed) {
    KT_RETURN_IF_ERROR(owners_.store->SetLabels(row.id, result.labels));
  }
  result.row = std::move(row);
  return result;
}

absl::Status Instances::SetLabels(const std::string& name, const store::Store::Labels& labels) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  return owners_.store->SetLabels(row.id, labels);
}

v1::AgentInstance Instances::View(const store::InstanceRow& row, const store::Store::Labels* labels,
                                  bool resources) const {
  v1::AgentInstance view = BuildInstanceView(row);
  if (labels != nullptr) {
    view.mutable_labels()->insert(labels->begin(), labels->end());
  } else if (absl::StatusOr<store::Store::Labels> own = owners_.store->GetLabels(row.id);
             own.ok()) {
    view.mutable_labels()->insert(own->begin(), own->end());
  }  // an unreadable label table shows no labels: the view is informational
  view.set_proxy_url(hooks_.proxy_url(row.name));
  v1::BudgetView budget;
  bool has_budget = false;
  FillUsageView(*owners_.store, *owners_.config, row, view.mutable_usage(), &budget, &has_budget);
  if (has_budget) {
    *view.mutable_budget() = std::move(budget);
  }
  view.set_restart_policy(PolicyOf(owners_.config->Settings(row).restart.policy));
  FillMemory(row, &view);
  if (resources) {
    hooks_.fill_resources(row, &view);
  }
  return view;
}

absl::StatusOr<v1::AgentInstance> Instances::View(const std::string& name, bool resources) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  return View(row, nullptr, resources);
}

absl::StatusOr<v1::UsageView> Instances::Usage(const std::string& name) {
  KT_ASSIGN_OR_RETURN(store::InstanceRow row, registry_.Find(name));
  v1::UsageView usage;
  FillUsageView(*owners_.store, *owners_.config, row, &usage, nullptr, nullptr);
  return usage;
}

void Instances::Views(const std::vector<Listed>& listed, bool resources,
                      v1::ListAgentsResponse* response) const {
  for (const Listed& item : listed) {
    *response->add_instances() = View(item.row, &item.labels, resources);
  }
  *response->mutable_totals() = BuildFleetTotals(response->instances());
}

absl::Status CheckOperatorLabel(std::string_view key) {
  KT_RETURN_IF_ERROR(contract::ValidateLabelKey(key));
  if (key.starts_with(contract::kReservedLabelPrefix)) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidLabel,
                               absl::StrCat("label '", std::string(key), "': the ",
                                            std::string(contract::kReservedLabelPrefix),
                                            " prefix is reserved for the daemon (fleet files set ",
                                            std::string(contract::kFleetLabel), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::engine
