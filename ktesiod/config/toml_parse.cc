// The single translation unit of the config library that includes toml++.
//
// toml++ is configured exactly as libcontract configures it (libcontract/src/toml.h): exceptions
// off (errors are values), TOML_ASSERT compiled out (toml++ 3.3 asserts on some malformed table
// headers instead of reporting them) and compiled mode. This TU does NOT define
// TOML_IMPLEMENTATION: the parser is the one instance libcontract compiles (src/toml.cc, linked
// through ktesio_contract), so the program holds one toml++ and no ODR clash. A header-only copy
// here would mix two different definitions of the same symbols (UBSan reports it). Should the
// two configurations ever diverge, toml++'s ABI namespaces (ex/noex) turn it into a link error.

#define TOML_ASSERT(expr) static_assert(true)
#define TOML_EXCEPTIONS 0
#define TOML_HEADER_ONLY 0
#define TOML_ENABLE_WINDOWS_COMPAT 0
#include <toml++/toml.h>

#include "config/errors.h"
#include "config/toml_io.h"
#include "ktesio/contract/toml_depth.h"

namespace ktesio::daemon::config::internal {
namespace {

std::string_view TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::array:
      return "array";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "value";
  }
}

void Walk(const toml::table& table, std::vector<std::string>& path, std::vector<TomlLeaf>& out) {
  for (auto&& [key, node] : table) {
    path.emplace_back(key.str());
    if (const toml::table* child = node.as_table(); child != nullptr) {
      Walk(*child, path, out);
    } else {
      TomlLeaf leaf;
      leaf.path = path;
      leaf.line = static_cast<int>(node.source().begin.line);
      leaf.column = static_cast<int>(node.source().begin.column);
      if (const auto* text = node.as_string(); text != nullptr) {
        leaf.kind = TomlLeaf::Kind::kString;
        leaf.text = text->get();
      } else if (const auto* integer = node.as_integer(); integer != nullptr) {
        leaf.kind = TomlLeaf::Kind::kInteger;
        leaf.text = std::to_string(integer->get());
      } else if (const auto* boolean = node.as_boolean(); boolean != nullptr) {
        leaf.kind = TomlLeaf::Kind::kBoolean;
        leaf.text = boolean->get() ? "true" : "false";
      } else {
        leaf.kind = TomlLeaf::Kind::kOther;
        leaf.text = std::string(TypeName(node));
      }
      out.push_back(std::move(leaf));
    }
    path.pop_back();
  }
}

}  // namespace

absl::StatusOr<std::vector<TomlLeaf>> ParseTomlLeaves(std::string_view text,
                                                      std::string_view source) {
  if (std::optional<contract::TomlTooDeep> deep = contract::FindTooDeepNesting(text)) {
    return ConfigInvalid(Cat(source, ":", deep->line, ": ", deep->message));
  }
  toml::parse_result result = toml::parse(text, source);
  if (!result) {
    const toml::parse_error& error = result.error();
    return ConfigInvalid(Cat(source, ":", error.source().begin.line, ":",
                             error.source().begin.column, ": ", error.description()));
  }
  std::vector<TomlLeaf> leaves;
  std::vector<std::string> path;
  Walk(result.table(), path, leaves);
  return leaves;
}

}  // namespace ktesio::daemon::config::internal
