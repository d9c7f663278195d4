// RenderTomlDocument and MergeIntoTomlDocument (declared in config_mapping.h).

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/contract/text.h"
#include "ktesio/contract/toml_depth.h"
#include "ktesio/contract/toml_text.h"
#include "ktesio/contract/utf8.h"
#include "ktesio/contract/validation.h"
#include "toml.h"

namespace ktesio::contract {

using text::Append;
using text::Cat;
using text::Escape;
using text::Join;
using text::Split;
namespace {

absl::Status Invalid(std::string_view message) {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, message);
}

std::string QuoteBasic(std::string_view value) { return QuoteTomlString(value); }

// The keys as a tree; building it is where conflicts are found.
struct KeyTree {
  std::map<std::string, std::pair<std::string, std::string>> leaves;  // segment -> (key, value)
  std::map<std::string, KeyTree> tables;

  // Any full key stored under this tree, for conflict messages.
  std::string AnyKey() const {
    if (!leaves.empty()) {
      return leaves.begin()->second.first;
    }
    return tables.empty() ? "" : tables.begin()->second.AnyKey();
  }
};

absl::StatusOr<KeyTree> BuildTree(const std::vector<std::pair<std::string, std::string>>& kvs) {
  KeyTree root;
  for (const auto& [key, value] : kvs) {
    if (!IsValidDottedKey(key)) {
      return Invalid(Cat("native key '", Escape(key),
                         "' must be a dotted key of bare segments ([A-Za-z0-9_-])"));
    }
    if (!IsValidUtf8(value)) {
      return Invalid(Cat("value for native key '", key, "' is not valid UTF-8"));
    }
    std::vector<std::string> segments;
    for (std::string_view segment : Split(key, '.')) {
      segments.emplace_back(segment);
    }
    KeyTree* node = &root;
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      if (auto leaf = node->leaves.find(segments[i]); leaf != node->leaves.end()) {
        return Invalid(Cat("native keys '", leaf->second.first, "' and '", key,
                           "' conflict: one is a value, the other needs a table"));
      }
      node = &node->tables[segments[i]];
    }
    const std::string& last = segments.back();
    if (auto leaf = node->leaves.find(last); leaf != node->leaves.end()) {
      return Invalid(Cat("native key '", key, "' is given twice"));
    }
    if (auto table = node->tables.find(last); table != node->tables.end()) {
      return Invalid(Cat("native keys '", key, "' and '", table->second.AnyKey(),
                         "' conflict: one is a value, the other needs a table"));
    }
    node->leaves.emplace(last, std::make_pair(key, value));
  }
  return root;
}

void Emit(const KeyTree& tree, const std::vector<std::string>& path, std::string& out) {
  if (!path.empty() && !tree.leaves.empty()) {
    Append(out, out.empty() ? "" : "\n", "[", Join(path, "."), "]\n");
  }
  for (const auto& [segment, key_value] : tree.leaves) {
    Append(out, segment, " = ", QuoteBasic(key_value.second), "\n");
  }
  for (const auto& [segment, child] : tree.tables) {
    std::vector<std::string> child_path = path;
    child_path.push_back(segment);
    Emit(child, child_path, out);
  }
}

}  // namespace

absl::StatusOr<std::string> RenderTomlDocument(
    const std::vector<std::pair<std::string, std::string>>& dotted_key_values) {
  KT_ASSIGN_OR_RETURN(KeyTree tree, BuildTree(dotted_key_values));
  std::string out;
  Emit(tree, {}, out);
  return out;
}

absl::StatusOr<std::string> MergeIntoTomlDocument(
    std::string_view existing,
    const std::vector<std::pair<std::string, std::string>>& dotted_key_values) {
  if (absl::StatusOr<KeyTree> tree = BuildTree(dotted_key_values); !tree.ok()) {
    return tree.status();
  }
  if (std::optional<TomlTooDeep> deep = FindTooDeepNesting(existing)) {
    return Invalid(Cat("existing document is not accepted: ", deep->line, ": ", deep->message));
  }
  toml::parse_result parsed = toml::parse(existing);
  if (!parsed) {
    const toml::source_position& at = parsed.error().source().begin;
    return Invalid(Cat("existing document is not valid TOML: ", at.line, ":", at.column, ": ",
                       parsed.error().description()));
  }
  toml::table& root = parsed.table();
  for (const auto& [key, value] : dotted_key_values) {
    std::vector<std::string> segments;
    for (std::string_view segment : Split(key, '.')) {
      segments.emplace_back(segment);
    }
    toml::table* table = &root;
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      toml::node* child = table->get(segments[i]);
      if (child == nullptr) {
        child = &table->insert(segments[i], toml::table{}).first->second;
      }
      if (!child->is_table()) {
        return Invalid(
            Cat("native key '", key, "' conflicts with the existing value '",
                Join(std::vector<std::string>(segments.begin(), segments.begin() + i + 1), "."),
                "' (not a table)"));
      }
      table = child->as_table();
    }
    const toml::node* current = table->get(segments.back());
    if (current != nullptr && (current->is_table() || current->is_array_of_tables())) {
      return Invalid(Cat("native key '", key, "' conflicts with an existing table"));
    }
    table->insert_or_assign(segments.back(), value);
  }
  std::ostringstream out;
  out << toml::toml_formatter(root, toml::format_flags::allow_unicode_strings);
  std::string text = out.str();
  if (!text.empty() && text.back() != '\n') {
    text += '\n';
  }
  // toml++'s formatter writes some keys bare that are not bare keys (a quoted key holding a tab
  // comes back as `r<TAB> = ...`, which reads as key "r"; found by fuzz_toml_document). Whatever
  // is written must read back as exactly what was meant, or the merge is refused.
  toml::parse_result reread = toml::parse(text);
  if (!reread || !(reread.table() == root)) {
    return Invalid(
        "the existing document cannot be rewritten faithfully (a key holding whitespace or "
        "control characters?): leave it to the agent, or fix the key");
  }
  return text;
}

}  // namespace ktesio::contract
