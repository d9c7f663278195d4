// [lifecycle.<op>] op templates: exec, args, env.

#include <map>
#include <string>
#include <vector>

#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/validation.h"
#include "manifest_context.h"

namespace ktesio::contract::internal {
namespace {

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

absl::StatusOr<std::vector<std::string>> ParseArgs(const ManifestContext& context,
                                                   const toml::node& node, std::string_view where) {
  const toml::array* array = node.as_array();
  if (array == nullptr) {
    return context.Error(node.source(), Cat("'args' in ", where,
                                            " must be an array of strings, got ", TypeName(node)));
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const std::string display = Cat("args[", i, "] in ", where);
    absl::StatusOr<std::string> arg = context.String(element, display);
    if (!arg.ok()) {
      return arg.status();
    }
    if (HasNul(*arg)) {
      return context.Error(element.source(), Cat(display, " contains a NUL byte"));
    }
    args.push_back(*std::move(arg));
  }
  return args;
}

absl::StatusOr<std::map<std::string, std::string>> ParseEnv(const ManifestContext& context,
                                                            const toml::node& node,
                                                            std::string_view where) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    return context.Error(node.source(), Cat("'env' in ", where, " must be a table of strings, got ",
                                            TypeName(node)));
  }
  std::map<std::string, std::string> env;
  for (const auto& [key, value_node] : EntriesInOrder(*table)) {
    if (!IsValidEnvOverrideName(key->str())) {
      return context.Error(key->source(), Cat("env name '", DisplayKey(key->str()), "' in ", where,
                                              " is invalid (non-empty, no '=' or NUL)"));
    }
    const std::string display = Cat("env value '", DisplayKey(key->str()), "' in ", where);
    absl::StatusOr<std::string> value = context.String(*value_node, display);
    if (!value.ok()) {
      return value.status();
    }
    if (HasNul(*value)) {
      return context.Error(value_node->source(), Cat(display, " contains a NUL byte"));
    }
    env.emplace(key->str(), *std::move(value));
  }
  return env;
}

}  // namespace

absl::StatusOr<std::string> RequiredString(const ManifestContext& context, const toml::table& table,
                                           std::string_view key, std::string_view where) {
  const toml::node* node = table.get(key);
  if (node == nullptr) {
    return context.Error(table.source(), Cat("missing mandatory key '", key, "' in ", where));
  }
  const std::string display = Cat("'", key, "' in ", where);
  absl::StatusOr<std::string> value = context.String(*node, display);
  if (value.ok() && value->empty()) {
    return context.Error(node->source(), Cat(display, " must not be empty"));
  }
  if (value.ok() && HasNul(*value)) {
    return context.Error(node->source(), Cat(display, " must not contain a NUL byte"));
  }
  return value;
}

// One op template ([lifecycle.<op>]): exec (required), args, env.
absl::StatusOr<OpTemplate> ParseOp(const ManifestContext& context, const toml::node& node,
                                   std::string_view op) {
  const std::string where = Cat("[lifecycle.", op, "]");
  KT_ASSIGN_OR_RETURN(const toml::table* table, context.Table(node, where));
  if ((table)->empty()) {
    return context.Error(node.source(), Cat(op == "start" ? "mandatory section " : "section ",
                                            where, " is empty (needs exec)"));
  }
  if (absl::Status s = context.CheckKeys(*table, where, "", {"exec", "args", "env"}); !s.ok()) {
    return s;
  }
  OpTemplate result;
  absl::StatusOr<std::string> exec = RequiredString(context, *table, "exec", where);
  if (!exec.ok()) {
    return exec.status();
  }
  result.exec = *std::move(exec);
  if (const toml::node* args = (table)->get("args")) {
    absl::StatusOr<std::vector<std::string>> parsed = ParseArgs(context, *args, where);
    if (!parsed.ok()) {
      return parsed.status();
    }
    result.args = *std::move(parsed);
  }
  if (const toml::node* env = (table)->get("env")) {
    absl::StatusOr<std::map<std::string, std::string>> parsed = ParseEnv(context, *env, where);
    if (!parsed.ok()) {
      return parsed.status();
    }
    result.env = *std::move(parsed);
  }
  return result;
}

}  // namespace ktesio::contract::internal
