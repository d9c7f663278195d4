// SuggestKey (declared in keys.h): the nearest known key for an "unknown key" error.

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "config/keys.h"

namespace ktesio::daemon::config {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
// transpositions each cost 1 ("modle" is one edit from "model").
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

size_t Threshold(size_t length) {
  if (length <= 6) {
    return 1;
  }
  return length <= 12 ? 2 : 3;
}

}  // namespace

std::string SuggestKey(std::string_view unknown) {
  if (unknown.size() > 256) {
    return "";
  }
  std::string lowered(unknown);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](char c) { return static_cast<char>(std::tolower(c)); });
  // A misspelled pass-through prefix keeps the operator's tail verbatim.
  const size_t dot = unknown.find('.');
  if (dot != std::string_view::npos && dot + 1 < unknown.size()) {
    const std::string prefix = lowered.substr(0, dot);
    if (prefix != "agent" && EditDistance(prefix, "agent") <= 1 && FindKey(lowered) == nullptr) {
      bool near_fixed_key = false;
      for (const KeySpec& spec : KnownKeys()) {
        near_fixed_key = near_fixed_key || EditDistance(lowered, spec.key) <= 2;
      }
      if (!near_fixed_key) {
        return std::string("agent.").append(unknown.substr(dot + 1));
      }
    }
  }
  std::string best;
  size_t best_distance = Threshold(unknown.size()) + 1;
  for (const KeySpec& spec : KnownKeys()) {
    if (spec.reserved) {
      continue;
    }
    const size_t distance = EditDistance(lowered, spec.key);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(spec.key);
    }
  }
  if (!best.empty()) {
    return best;
  }
  // A table name ("restart", "budget.tokens") rather than a leaf.
  const std::string table = lowered + ".";
  for (const KeySpec& spec : KnownKeys()) {
    if (!spec.reserved && spec.key.starts_with(table)) {
      return std::string(spec.key);
    }
  }
  return "";
}

}  // namespace ktesio::daemon::config
