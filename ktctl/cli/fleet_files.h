#pragma once

// Reading fleet files for `ktctl apply` and `ktctl diff`: FILE or every *.toml in DIR (sorted,
// not recursive), parsed by libcontract, manifests read relative to their fleet file, all
// turned into the FleetSpecs FleetService.Apply takes. Every problem of every file is
// collected before anything is sent.

#include <map>
#include <string>
#include <vector>

#include "ktesio/v1/fleet.pb.h"

namespace ktesio::cli {

inline constexpr size_t kMaxFleetFileBytes = 4 << 20;  // 4 MiB: 10,000 instances fit

struct FleetFiles {
  std::vector<v1::FleetSpec> fleets;
  // Each distinct manifest once, by the absolute path the specs name (ApplyFleetRequest).
  std::map<std::string, std::string> manifests;
  std::vector<std::string> problems;  // "file:line: ..." each
};

FleetFiles ReadFleetFiles(const std::vector<std::string>& paths);

}  // namespace ktesio::cli
