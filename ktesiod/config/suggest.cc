// SuggestKey (declared in keys.h): the nearest known key for an "unknown key" error.

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "config/keys.h"
#include "ktesio/contract/suggest.h"

namespace ktesio::daemon::config {
namespace {

using contract::EditDistance;

}  // namespace

std::string SuggestKey(std::string_view unknown) {
  if (unknown.size() > 256) {
    return "";
  }
  std::string lowered(unknown);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
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
  size_t best_distance = contract::SuggestionThreshold(unknown.size()) + 1;
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

std::string NearestKey(std::string_view unknown) {
  std::string lowered(unknown.substr(0, 256));
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  // The keys of the deepest table the operator named come first ("logs.bogus" names a key of
  // logs.*), then the edit distance decides.
  auto shared_tables = [&](std::string_view key) {
    size_t shared = 0;
    for (size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', dot + 1)) {
      if (lowered.size() <= dot ||
          std::string_view(lowered).substr(0, dot + 1) != key.substr(0, dot + 1)) {
        break;
      }
      ++shared;
    }
    return shared;
  };
  std::string best;
  size_t best_shared = 0;
  size_t best_distance = std::string::npos;
  for (const KeySpec& spec : KnownKeys()) {
    if (spec.reserved) {
      continue;
    }
    const size_t shared = shared_tables(spec.key);
    const size_t distance = EditDistance(lowered, spec.key);
    if (best.empty() || shared > best_shared ||
        (shared == best_shared && distance < best_distance)) {
      best_shared = shared;
      best_distance = distance;
      best = std::string(spec.key);
    }
  }
  return best;
}

}  // namespace ktesio::daemon::config
