// Fuzzes the fleet-file parser and the label selector parser with arbitrary bytes: both must be
// total (never crash, hang or assert), report problems as "path:line: ..." and accept only
// specs that satisfy their own rules.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ktesio/contract/fleet_file.h"
#include "ktesio/contract/labels.h"

using ktesio::fuzz::AsText;
using ktesio::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ktesio::contract;
  const std::string_view text = AsText(data, size);
  const FleetFileParse parsed = ParseFleetFile(text, "f.toml");
  for (const std::string& problem : parsed.problems) {
    Check(problem.starts_with("f.toml:"));
  }
  if (parsed.problems.empty()) {
    Check(!parsed.spec.name.empty());
    for (const FleetAgentSpec& agent : parsed.spec.agents) {
      Check(agent.manifest.empty() != agent.kind.empty());
      Check(agent.state.empty() || agent.state == "running" || agent.state == "stopped");
      for (const auto& [key, value] : agent.labels) {
        Check(ValidateLabelKey(key).ok() && ValidateLabelValue(key, value).ok());
      }
    }
  }
  // The same bytes as a selector: parsing is total; a parsed selector evaluates.
  if (absl::StatusOr<Selector> selector = Selector::Parse(text); selector.ok()) {
    selector->Matches({{"team", "a"}, {"tier", "batch"}});
  }
  return 0;
}
