// FleetService.Export: the current instances written as a fleet file (docs/fleet-file.md).

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "config/instance_file.h"
#include "config/toml_io.h"
#include "fleet/apply.h"
#include "ktesio/contract/labels.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::fleet {
namespace {

using config::internal::TomlLeaf;

TomlLeaf Leaf(std::vector<std::string> path, std::string text) {
  TomlLeaf leaf;
  leaf.path = std::move(path);
  leaf.text = std::move(text);
  return leaf;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "exported";
  }
  std::string out;
  for (const char* c = name; *c != '\0' && out.size() < 63; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.';
    out.push_back(ok ? *c : '-');
  }
  return out;
}

// The leaves of one instance; `notes` gets a comment line for every value left out.
void AddInstance(const v1::AgentInstance& instance, std::vector<TomlLeaf>* leaves,
                 std::vector<std::string>* notes) {
  const std::vector<std::string> base = {"agents", instance.name()};
  auto at = [&](std::vector<std::string> tail) {
    std::vector<std::string> path = base;
    path.insert(path.end(), tail.begin(), tail.end());
    return path;
  };
  const v1::AdapterSnapshot& adapter = instance.adapter();
  if (adapter.builtin()) {
    leaves->push_back(Leaf(at({"kind"}), adapter.kind()));
  } else {
    leaves->push_back(Leaf(at({"manifest"}), adapter.manifest_path()));
  }
  switch (instance.state()) {
    case v1::AGENT_STATE_STARTING:
    case v1::AGENT_STATE_RUNNING:
    case v1::AGENT_STATE_PAUSED:
      leaves->push_back(Leaf(at({"state"}), "running"));
      break;
    case v1::AGENT_STATE_STOPPED:
    case v1::AGENT_STATE_STOPPING:
    case v1::AGENT_STATE_FAILED:
      leaves->push_back(Leaf(at({"state"}), "stopped"));
      break;
    default:
      break;  // registered, never started: leave the state alone
  }
  for (const auto& [key, value] : instance.labels()) {
    if (!key.starts_with(contract::kReservedLabelPrefix)) {
      leaves->push_back(Leaf(at({"labels", key}), value));
    }
  }
  absl::StatusOr<std::map<std::string, std::string>> config =
      config::instance_file::Load(instance.agent_home());
  if (!config.ok()) {
    notes->push_back(absl::StrCat(
        instance.name(), ": config not exported: ", std::string(config.status().message())));
    return;
  }
  for (const auto& [key, value] : *config) {
    if (LooksLikeCredential(key, value)) {
      notes->push_back(absl::StrCat(instance.name(), ": ", key,
                                    " holds a literal credential and was left out; store it "
                                    "with `ktctl secret set NAME` and write \"secret:NAME\""));
      continue;
    }
    leaves->push_back(Leaf(at({"config", key}), value));
  }
}

}  // namespace

absl::Status Export(engine::Engine& engine, const v1::ExportFleetRequest& request,
                    v1::ExportFleetResponse* response) {
  KT_ASSIGN_OR_RETURN(contract::Selector selector, contract::Selector::Parse(request.selector()));
  KT_ASSIGN_OR_RETURN(std::vector<engine::Instances::Listed> rows,
                      engine.instances().List(&selector));
  v1::ListAgentsResponse listed;
  engine.instances().Views(rows, false, &listed);
  std::string name = request.name();
  if (name.empty()) {
    name = HostName();
  }
  KT_RETURN_IF_ERROR(contract::ValidateLabelValue(contract::kFleetLabel, name));
  std::vector<TomlLeaf> leaves;
  std::vector<std::string> notes;
  for (const v1::AgentInstance& instance : listed.instances()) {
    AddInstance(instance, &leaves, &notes);
  }
  std::vector<std::string> comment = {
      absl::StrCat("Exported by ktesiod from ", listed.instances_size(), " Agent Instance",
                   listed.instances_size() == 1 ? "" : "s",
                   "; secrets appear as secret:NAME references only."),
      "Apply with: ktctl apply -f FILE (docs/fleet-file.md)."};
  comment.insert(comment.end(), notes.begin(), notes.end());
  // [fleet] first, then the agents (each rendering sorts its own leaves).
  absl::StatusOr<std::string> head =
      config::internal::RenderTomlLeaves({Leaf({"fleet", "name"}, name)}, comment);
  if (!head.ok()) {
    return head.status();
  }
  absl::StatusOr<std::string> agents = config::internal::RenderTomlLeaves(leaves, {});
  if (!agents.ok()) {
    return agents.status();
  }
  std::string toml = absl::StrCat(*head, "\n", *agents);
  if (!toml.ends_with("\n")) {
    toml.push_back('\n');
  }
  response->set_toml(std::move(toml));
  return absl::OkStatus();
}

}  // namespace ktesio::daemon::fleet
