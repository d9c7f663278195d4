// RenderTomlLeaves and JoinPath (declared in toml_io.h). No toml++ here: the output format is
// ours, byte-stable, and re-parsed once to prove it is valid TOML.

#include <algorithm>
#include <map>

#include "config/errors.h"
#include "config/toml_io.h"
#include "ktesio/contract/toml_text.h"

namespace ktesio::daemon::config::internal {
namespace {

std::string QuoteBasic(std::string_view value) { return contract::QuoteTomlString(value); }

std::string Segment(std::string_view segment) { return contract::TomlKeySegment(segment); }

std::string DottedSegments(const std::vector<std::string>& path, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    out += i == 0 ? "" : ".";
    out += Segment(path[i]);
  }
  return out;
}

bool IsPrefix(const std::vector<std::string>& shorter, const std::vector<std::string>& longer) {
  return shorter.size() <= longer.size() &&
         std::equal(shorter.begin(), shorter.end(), longer.begin());
}

}  // namespace

std::string JoinPath(const std::vector<std::string>& path) {
  std::string out;
  for (const std::string& segment : path) {
    out += out.empty() ? "" : ".";
    out += segment;
  }
  return out;
}

absl::StatusOr<std::string> RenderTomlLeaves(const std::vector<TomlLeaf>& leaves,
                                             const std::vector<std::string>& comment) {
  std::vector<const TomlLeaf*> sorted;
  for (const TomlLeaf& leaf : leaves) {
    if (leaf.path.empty() || leaf.kind == TomlLeaf::Kind::kOther) {
      return ConfigInvalid(Cat("cannot write '", JoinPath(leaf.path), "': a ", leaf.text,
                               " value is not supported here"));
    }
    if (leaf.kind == TomlLeaf::Kind::kString && !IsValidUtf8(leaf.text)) {
      return ConfigInvalid(Cat("cannot write '", JoinPath(leaf.path), "': not valid UTF-8"));
    }
    sorted.push_back(&leaf);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TomlLeaf* a, const TomlLeaf* b) { return a->path < b->path; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (IsPrefix(sorted[i - 1]->path, sorted[i]->path)) {
      return ConfigInvalid(Cat("keys '", JoinPath(sorted[i - 1]->path), "' and '",
                               JoinPath(sorted[i]->path), "' conflict"));
    }
  }
  std::map<std::vector<std::string>, std::vector<const TomlLeaf*>> by_parent;
  for (const TomlLeaf* leaf : sorted) {
    by_parent[std::vector<std::string>(leaf->path.begin(), leaf->path.end() - 1)].push_back(leaf);
  }
  std::string out;
  for (const std::string& line : comment) {
    out += Cat("# ", line, "\n");
  }
  for (const auto& [parent, group] : by_parent) {
    if (!parent.empty()) {
      out += Cat(out.empty() ? "" : "\n", "[", DottedSegments(parent, parent.size()), "]\n");
    }
    for (const TomlLeaf* leaf : group) {
      const std::string value =
          leaf->kind == TomlLeaf::Kind::kString ? QuoteBasic(leaf->text) : leaf->text;
      out += Cat(Segment(leaf->path.back()), " = ", value, "\n");
    }
  }
  if (absl::StatusOr<std::vector<TomlLeaf>> check = ParseTomlLeaves(out, "rendered document");
      !check.ok()) {
    return check.status();
  }
  return out;
}

}  // namespace ktesio::daemon::config::internal
