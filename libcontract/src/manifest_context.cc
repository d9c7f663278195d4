#include "manifest_context.h"

#include <algorithm>
#include <string>

#include "ktesio/contract/error.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract::internal {

absl::Status ManifestContext::Error(const toml::source_region& where, std::string_view what) const {
  if (where.begin.line == 0) {
    return Error(what);
  }
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
                   Cat(source_name_, ":", where.begin.line, ":", where.begin.column, ": ", what));
}

absl::Status ManifestContext::Error(std::string_view what) const {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
                   Cat(source_name_, ": ", what));
}

absl::Status ManifestContext::CheckKeys(const toml::table& table, std::string_view where,
                                        std::string_view what,
                                        std::initializer_list<std::string_view> allowed) const {
  for (const auto& [key, unused_node] : EntriesInOrder(table)) {
    if (std::find(allowed.begin(), allowed.end(), key->str()) != allowed.end()) {
      continue;
    }
    const std::string_view separator = where.starts_with("at ") ? " " : " in ";
    return Error(key->source(), Cat("unknown key '", DisplayKey(key->str()), "'", separator, where,
                                    what.empty() ? "" : Cat(": unknown ", what),
                                    " (allowed: ", Join(allowed, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ManifestContext::String(const toml::node& node,
                                                    std::string_view display) const {
  if (const auto* value = node.as_string()) {
    return value->get();
  }
  return Error(node.source(), Cat(display, " must be a string, got ", TypeName(node)));
}

absl::StatusOr<const toml::table*> ManifestContext::Table(const toml::node& node,
                                                          std::string_view display) const {
  if (const auto* table = node.as_table()) {
    return table;
  }
  return Error(node.source(), Cat(display, " must be a table, got ", TypeName(node)));
}

std::vector<std::pair<const toml::key*, const toml::node*>> EntriesInOrder(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [key, node] : table) {
    entries.emplace_back(&key, &node);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const toml::source_position& pa = a.first->source().begin;
    const toml::source_position& pb = b.first->source().begin;
    return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
  });
  return entries;
}

std::string_view TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string DisplayKey(std::string_view key) {
  constexpr size_t kMaxShown = 64;
  std::string shown = Escape(key.substr(0, kMaxShown));
  if (key.size() > kMaxShown) {
    Append(shown, "...");
  }
  return shown;
}

}  // namespace ktesio::contract::internal
