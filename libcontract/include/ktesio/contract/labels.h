#pragma once

// Instance labels and label selectors, in Kubernetes' syntax so operators need learn nothing new.
//
//   key      [prefix/]name   prefix: a DNS subdomain (lowercase, at most 253 characters);
//                            name: 1..63 characters [A-Za-z0-9._-], alphanumeric at both ends
//   value    "" or 1..63 characters like a key's name
//   selector requirements joined by commas, all of which must hold:
//            k=v  k==v  k!=v  k (exists)  !k (absent)  k in (a,b)  k notin (a,b)
//
// `k!=v` and `k notin (...)` also match instances without the key, as in Kubernetes. Keys with
// the `ktesio.io/` prefix are set by the daemon only (the fleet ownership label).

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ktesio::contract {

using Labels = std::map<std::string, std::string>;

// The label key the daemon sets on instances applied from a fleet file: the fleet's name.
inline constexpr std::string_view kFleetLabel = "ktesio.io/fleet";
inline constexpr std::string_view kReservedLabelPrefix = "ktesio.io/";

// Errors: INVALID_ARGUMENT/INVALID_LABEL naming the key or value and the rule it breaks.
absl::Status ValidateLabelKey(std::string_view key);
absl::Status ValidateLabelValue(std::string_view key, std::string_view value);

class Selector {
 public:
  // Parses `text`; "" selects everything. Errors: INVALID_ARGUMENT/INVALID_SELECTOR naming the
  // offending requirement.
  static absl::StatusOr<Selector> Parse(std::string_view text);

  bool Matches(const Labels& labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kExists, kNotExists, kIn, kNotIn };
  struct Requirement {
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

// Parses the `ktctl agent label` arguments: `k=v` sets, `k-` removes. Errors:
// INVALID_ARGUMENT/INVALID_LABEL.
struct LabelEdit {
  Labels set;
  std::vector<std::string> remove;
};
absl::StatusOr<LabelEdit> ParseLabelEdits(const std::vector<std::string>& args);

}  // namespace ktesio::contract
