#include "ktesio/contract/fleet_file.h"

#include <set>

#include "absl/strings/str_cat.h"

#include "ktesio/contract/suggest.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/toml_depth.h"
#include "toml.h"

namespace ktesio::contract {
namespace {

using text::Append;
using text::Cat;

class Problems {
 public:
  Problems(std::string_view path, std::vector<std::string>* out) : path_(path), out_(out) {}
  void Add(uint32_t line, std::string_view message) {
    // One line each, whatever a name in the message holds (a quoted key may contain a newline).
    out_->push_back(text::EscapeControls(Cat(path_, ":", line, ": ", message)));
  }
  void Add(const toml::node& node, std::string_view message) {
    Add(static_cast<uint32_t>(node.source().begin.line), message);
  }

 private:
  std::string_view path_;
  std::vector<std::string>* out_;
};

uint32_t LineOf(const toml::node& node) { return static_cast<uint32_t>(node.source().begin.line); }

std::string ToStd(std::string_view s) { return std::string(s); }

void UnknownKey(Problems& problems, const toml::node& node, std::string_view where,
                std::string_view key, const std::vector<std::string>& known) {
  std::string message = Cat("unknown key '", key, "' in ", where);
  if (std::string near = Nearest(key, known); !near.empty()) {
    Append(message, "; did you mean '", near, "'?");
  } else {
    Append(message, " (known: ");
    for (size_t i = 0; i < known.size(); ++i) {
      Append(message, i == 0 ? "" : ", ", known[i]);
    }
    Append(message, ")");
  }
  problems.Add(node, message);
}

// 1..128 characters [a-z0-9_-], beginning with [a-z0-9]: the instance name rule.
bool IsInstanceName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return false;
  }
  const auto lower_or_digit = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!lower_or_digit(name.front())) {
    return false;
  }
  for (char c : name) {
    if (!lower_or_digit(c) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

void FlattenConfig(Problems& problems, const toml::table& table, const std::string& prefix,
                   std::vector<FleetAgentSpec::Setting>* out) {
  for (const auto& [raw_key, node] : table) {
    const std::string key =
        prefix.empty() ? ToStd(raw_key.str()) : Cat(prefix, ".", ToStd(raw_key.str()));
    if (const toml::table* nested = node.as_table()) {
      FlattenConfig(problems, *nested, key, out);
      continue;
    }
    FleetAgentSpec::Setting setting{key, "", LineOf(node)};
    if (const auto* s = node.as_string()) {
      setting.value = ToStd(s->get());
    } else if (const auto* i = node.as_integer()) {
      setting.value = Cat(i->get());
    } else if (const auto* b = node.as_boolean()) {
      setting.value = b->get() ? "true" : "false";
    } else if (const auto* f = node.as_floating_point()) {
      setting.value = absl::StrCat(f->get());
    } else {
      problems.Add(node, Cat("config '", key,
                             "': expected a string, number or boolean (arrays and dates "
                             "are not config values)"));
      continue;
    }
    out->push_back(std::move(setting));
  }
}

void ParseLabels(Problems& problems, const toml::node& node, FleetAgentSpec* agent) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    problems.Add(node,
                 Cat("agents.", agent->name,
                     ": labels: expected a table of strings, e.g. labels = { team = \"a\" }"));
    return;
  }
  for (const auto& [raw_key, value] : *table) {
    const std::string key = ToStd(raw_key.str());
    const auto* text = value.as_string();
    if (text == nullptr) {
      problems.Add(value,
                   Cat("agents.", agent->name, ": label '", key, "': expected a string value"));
      continue;
    }
    if (absl::Status s = ValidateLabelKey(key); !s.ok()) {
      problems.Add(value, Cat("agents.", agent->name, ": ", s.message()));
      continue;
    }
    if (key.starts_with(kReservedLabelPrefix)) {
      problems.Add(value, Cat("agents.", agent->name, ": label '", key, "': the ",
                              kReservedLabelPrefix, " prefix is reserved for the daemon"));
      continue;
    }
    if (absl::Status s = ValidateLabelValue(key, text->get()); !s.ok()) {
      problems.Add(value, Cat("agents.", agent->name, ": ", s.message()));
      continue;
    }
    agent->labels[key] = ToStd(text->get());
  }
}

void ParseAgent(Problems& problems, std::string_view name, const toml::node& node,
                FleetFileSpec* spec) {
  FleetAgentSpec agent;
  agent.name = ToStd(name);
  agent.line = LineOf(node);
  if (!IsInstanceName(name)) {
    agent.name_valid = false;
    problems.Add(node, Cat("invalid instance name '", name,
                           "': expected ^[a-z0-9][a-z0-9_-]*$, at most 128 characters"));
  }
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    problems.Add(node, Cat("agents.", name, ": expected a table"));
    return;
  }
  static const std::vector<std::string> kKeys = {"manifest", "kind", "state", "labels", "config"};
  for (const auto& [raw_key, node_value] : *table) {
    const toml::node& value = node_value;  // a lambda cannot capture a structured binding (C++20)
    const std::string key = ToStd(raw_key.str());
    const auto string_value = [&](std::string* out) {
      if (const auto* s = value.as_string()) {
        *out = ToStd(s->get());
        return true;
      }
      problems.Add(value, Cat("agents.", name, ".", key, ": expected a string"));
      return false;
    };
    if (key == "manifest") {
      if (string_value(&agent.manifest) && agent.manifest.empty()) {
        problems.Add(value, Cat("agents.", name, ".manifest is empty"));
      }
      agent.manifest_line = LineOf(value);
    } else if (key == "kind") {
      if (string_value(&agent.kind) && agent.kind.empty()) {
        problems.Add(value, Cat("agents.", name, ".kind is empty"));
      }
    } else if (key == "state") {
      if (string_value(&agent.state) && agent.state != "running" && agent.state != "stopped") {
        problems.Add(value, Cat("agents.", name, ".state must be \"running\" or ",
                                "\"stopped\" (omit it to leave the state alone), got \"",
                                agent.state, "\""));
      }
    } else if (key == "labels") {
      ParseLabels(problems, value, &agent);
    } else if (key == "config") {
      if (const toml::table* config = value.as_table()) {
        FlattenConfig(problems, *config, "", &agent.config);
      } else {
        problems.Add(value, Cat("agents.", name, ".config: expected a table"));
      }
    } else {
      UnknownKey(problems, value, Cat("[agents.", name, "]"), key, kKeys);
    }
  }
  if (agent.manifest.empty() == agent.kind.empty()) {
    problems.Add(node, Cat("agents.", name,
                           ": give exactly one of manifest (an adapter.toml or its "
                           "directory) or kind (a builtin)"));
  }
  spec->agents.push_back(std::move(agent));
}

}  // namespace

FleetFileParse ParseFleetFile(std::string_view text, std::string_view path) {
  FleetFileParse result;
  result.spec.path = ToStd(path);
  Problems problems(path, &result.problems);
  if (std::optional<TomlTooDeep> deep = FindTooDeepNesting(text)) {
    problems.Add(deep->line, deep->message);
    return result;
  }
  toml::parse_result parsed = toml::parse(text, path);
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    problems.Add(static_cast<uint32_t>(error.source().begin.line),
                 Cat("TOML syntax error: ", ToStd(error.description())));
    return result;
  }
  const toml::table& root = parsed.table();
  bool has_fleet = false;
  bool name_reported = false;  // fleet.name has a problem of its own already
  for (const auto& [raw_key, node] : root) {
    const std::string key = ToStd(raw_key.str());
    if (key == "fleet") {
      has_fleet = true;
      const toml::table* fleet = node.as_table();
      if (fleet == nullptr) {
        problems.Add(node, "fleet: expected a table");
        continue;
      }
      result.spec.name_line = LineOf(node);
      for (const auto& [fleet_key, value] : *fleet) {
        if (fleet_key.str() != "name") {
          UnknownKey(problems, value, "[fleet]", fleet_key.str(), {"name"});
          continue;
        }
        result.spec.name_line = LineOf(value);
        if (const auto* s = value.as_string()) {
          result.spec.name = ToStd(s->get());
        } else {
          problems.Add(value, "fleet.name: expected a string");
          name_reported = true;  // not "missing" as well
        }
      }
    } else if (key == "agents") {
      const toml::table* agents = node.as_table();
      if (agents == nullptr) {
        problems.Add(node, "agents: expected tables [agents.NAME]");
        continue;
      }
      for (const auto& [name, agent] : *agents) {
        ParseAgent(problems, name.str(), agent, &result.spec);
      }
    } else {
      UnknownKey(problems, node, "the file", key, {"fleet", "agents"});
    }
  }
  if ((!has_fleet || result.spec.name.empty()) && !name_reported) {
    if (has_fleet && result.spec.name_line != 0) {
      problems.Add(result.spec.name_line, "fleet.name is missing or empty");
    } else {
      problems.Add(1, "missing [fleet] name = \"...\" (the fleet's name owns its instances)");
    }
  } else if (absl::Status s = ValidateLabelValue(kFleetLabel, result.spec.name); !s.ok()) {
    problems.Add(result.spec.name_line,
                 Cat("fleet.name '", result.spec.name,
                     "': 1 to 63 characters [A-Za-z0-9._-], beginning and ending with a "
                     "letter or digit (it becomes the ",
                     kFleetLabel, " label)"));
  }
  return result;
}

}  // namespace ktesio::contract
