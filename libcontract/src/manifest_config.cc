// The [config] section: unified key -> native delivery target.
//
// A table is a mapping when it holds any of env/flag/file, and a namespace when it holds only
// sub-tables; so [config."memory.dir"] and [config.memory.dir] both map the key "memory.dir".

#include <string>
#include <vector>

#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/home_path.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/suggest.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/validation.h"
#include "manifest_context.h"

namespace ktesio::contract::internal {
namespace {

constexpr std::string_view kTargets[] = {"env", "flag", "file"};

bool IsTargetName(std::string_view key) {
  for (std::string_view target : kTargets) {
    if (key == target) {
      return true;
    }
  }
  return false;
}

// "[config.memory.dir]" or "[config.\"memory.dir\"]", as the author spelled it.
std::string TableDisplay(const std::vector<std::string>& path) {
  std::string display = "[config";
  for (const std::string& segment : path) {
    if (IsValidDottedKey(segment) && segment.find('.') == std::string::npos) {
      Append(display, ".", segment);
    } else {
      Append(display, ".\"", DisplayKey(segment), "\"");
    }
  }
  return display + "]";
}

class ConfigParser {
 public:
  explicit ConfigParser(const ManifestContext& context) : context_(context) {}

  absl::Status Walk(const toml::table& table, const std::vector<std::string>& path);
  std::map<std::string, ConfigTarget> Result() && { return std::move(result_); }

 private:
  absl::Status Mapping(const toml::table& table, const std::vector<std::string>& path);
  absl::StatusOr<ConfigTarget> Target(const toml::key& key, const toml::node& node,
                                      const std::string& where);
  absl::StatusOr<ConfigTarget> FileTarget(const toml::node& node, const std::string& where);

  const ManifestContext& context_;
  std::map<std::string, ConfigTarget> result_;
};

absl::Status ConfigParser::Walk(const toml::table& table, const std::vector<std::string>& path) {
  for (const auto& [key, node] : EntriesInOrder(table)) {
    std::vector<std::string> child_path = path;
    child_path.emplace_back(key->str());
    const std::string where = TableDisplay(child_path);
    const toml::table* child = node->as_table();
    if (child == nullptr) {
      return context_.Error(
          key->source(), Cat(where, " must be a table holding exactly one of env, flag, file, got ",
                             TypeName(*node)));
    }
    if (child->empty()) {
      return context_.Error(node->source(), Cat(where,
                                                " is empty: expected exactly one "
                                                "of env, flag, file"));
    }
    bool is_mapping = false;
    for (const auto& [child_key, unused] : *child) {
      is_mapping = is_mapping || IsTargetName(child_key.str());
    }
    if (is_mapping) {
      KT_RETURN_IF_ERROR(Mapping(*child, child_path));
      continue;
    }
    for (const auto& [child_key, child_node] : EntriesInOrder(*child)) {
      if (!child_node->is_table()) {
        return context_.Error(
            child_key->source(),
            Cat("unknown key '", DisplayKey(child_key->str()), "' in ", where,
                " (a mapping holds exactly one of env, flag, file; a namespace holds "
                "only sub-tables)"));
      }
    }
    KT_RETURN_IF_ERROR(Walk(*child, child_path));
  }
  return absl::OkStatus();
}

absl::Status ConfigParser::Mapping(const toml::table& table, const std::vector<std::string>& path) {
  const std::string where = TableDisplay(path);
  const std::string unified_key = Join(path, ".");
  std::vector<std::pair<const toml::key*, const toml::node*>> targets;
  for (const auto& [key, node] : EntriesInOrder(table)) {
    if (IsTargetName(key->str())) {
      targets.emplace_back(key, node);
    } else if (node->is_table()) {
      return context_.Error(key->source(),
                            Cat(where, " mixes a mapping (env/flag/file) with nested key '",
                                DisplayKey(key->str()), "'"));
    } else {
      return context_.Error(key->source(),
                            Cat("unknown key '", DisplayKey(key->str()), "' in ", where,
                                " (allowed: exactly one of env, flag, "
                                "file)"));
    }
  }
  if (targets.size() != 1) {
    std::vector<std::string> names;
    for (const auto& [key, unused] : targets) {
      names.emplace_back(key->str());
    }
    return context_.Error(
        targets[1].first->source(),
        Cat("config key '", DisplayKey(unified_key), "' in ", where, " declares ", targets.size(),
            " targets (", Join(names, ", "), "): exactly one of env, flag, file is allowed"));
  }
  if (!IsValidDottedKey(unified_key)) {
    return context_.Error(table.source(),
                          Cat("config key '", DisplayKey(unified_key), "' in ", where,
                              " is invalid: unified keys are dot-separated segments of "
                              "[A-Za-z0-9_-]"));
  }
  if (!IsMappableConfigKey(unified_key)) {
    // Typo protection, as for every other key of the manifest: "modle" would deliver nothing.
    std::string message = Cat("unknown config key '", DisplayKey(unified_key), "' in ", where);
    if (unified_key.starts_with("agent.")) {
      Append(message, ": an agent.<NAME> key needs NAME to be a valid environment variable name");
    } else {
      std::vector<std::string> known(DocumentedConfigKeys().begin(), DocumentedConfigKeys().end());
      if (std::string near = Nearest(unified_key, known); !near.empty()) {
        Append(message, " (did you mean '", near, "'?)");
      }
      Append(message,
             ": a manifest maps documented unified keys (model, budget.*, cost.rate.*, "
             "restart.*, logs.*, autostart, memory.dir, metering.base_url, "
             "metering.upstream_base_url) or agent.<NAME>");
    }
    return context_.Error(table.source(), message);
  }
  absl::StatusOr<ConfigTarget> target = Target(*targets[0].first, *targets[0].second, where);
  if (!target.ok()) {
    return target.status();
  }
  if (!result_.emplace(unified_key, *std::move(target)).second) {
    return context_.Error(targets[0].first->source(), Cat("config key '", unified_key,
                                                          "' is mapped twice (quoted "
                                                          "and nested spellings name the "
                                                          "same key)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConfigTarget> ConfigParser::Target(const toml::key& key, const toml::node& node,
                                                  const std::string& where) {
  ConfigTarget target;
  if (key.str() == "file") {
    return FileTarget(node, where);
  }
  const std::string display = Cat("'", key.str(), "' in ", where);
  absl::StatusOr<std::string> value = context_.String(node, display);
  if (!value.ok()) {
    return value.status();
  }
  if (key.str() == "env") {
    if (!IsValidEnvVarName(*value)) {
      return context_.Error(node.source(), Cat(display, ": '", DisplayKey(*value),
                                               "' is not a valid env variable name "
                                               "([A-Za-z_][A-Za-z0-9_]*)"));
    }
    target.kind = ConfigTarget::Kind::kEnv;
    target.env = *std::move(value);
    return target;
  }
  if (value->empty() || value->find('\0') != std::string::npos) {
    return context_.Error(node.source(),
                          Cat(display, " must be a non-empty flag without NUL bytes"));
  }
  target.kind = ConfigTarget::Kind::kFlag;
  target.flag = *std::move(value);
  return target;
}

absl::StatusOr<ConfigTarget> ConfigParser::FileTarget(const toml::node& node,
                                                      const std::string& where) {
  const std::string display = Cat("'file' in ", where);
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return context_.Error(node.source(), Cat(display,
                                             " must be a table { path = \"...\", key = \"...\" }"
                                             ", got ",
                                             TypeName(node)));
  }
  if (absl::Status s = context_.CheckKeys(*table, display, "", {"path", "key"}); !s.ok()) {
    return s;
  }
  ConfigTarget target;
  target.kind = ConfigTarget::Kind::kFile;
  for (std::string_view field : {"path", "key"}) {
    const toml::node* value_node = table->get(field);
    if (value_node == nullptr) {
      return context_.Error(node.source(), Cat("missing mandatory key '", field, "' in ", display));
    }
    const std::string field_display = Cat("'", field, "' of ", display);
    absl::StatusOr<std::string> value = context_.String(*value_node, field_display);
    if (!value.ok()) {
      return value.status();
    }
    if (field == "path") {
      absl::StatusOr<std::string> normalized = NormalizeHomeRelativePath(*value);
      if (!normalized.ok()) {
        return context_.Error(value_node->source(),
                              Cat(field_display, ": ", normalized.status().message()));
      }
      target.file_path = *std::move(normalized);
    } else if (!IsValidDottedKey(*value)) {
      return context_.Error(value_node->source(), Cat(field_display, ": '", DisplayKey(*value),
                                                      "' must be a dotted key of bare segments "
                                                      "([A-Za-z0-9_-]), e.g. llm.model"));
    } else {
      target.file_key = *std::move(value);
    }
  }
  return target;
}

}  // namespace

absl::StatusOr<std::map<std::string, ConfigTarget>> ParseConfigSection(
    const ManifestContext& context, const toml::node& config) {
  KT_ASSIGN_OR_RETURN(const toml::table* table, context.Table(config, "[config]"));
  ConfigParser parser(context);
  if (absl::Status s = parser.Walk(*table, {}); !s.ok()) {
    return s;
  }
  return std::move(parser).Result();
}

}  // namespace ktesio::contract::internal
