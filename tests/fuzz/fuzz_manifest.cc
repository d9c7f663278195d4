// Fuzzes ParseManifest with arbitrary bytes and checks the invariants of its result: an accepted
// manifest satisfies ValidateDeclaration and renders; a rejection carries one of the two
// manifest reasons and the documented message shape.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "ktesio/contract/config_mapping.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/manifest.h"
#include "ktesio/contract/validation.h"

using ktesio::fuzz::AsText;
using ktesio::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ktesio::contract::AdapterDeclaration;
  using ktesio::contract::ErrorReason;
  using ktesio::contract::ParseManifest;
  using ktesio::contract::RenderDelivery;
  using ktesio::contract::RenderedDelivery;
  using ktesio::contract::RenderTomlDocument;
  using ktesio::contract::ValidateDeclaration;
  namespace reason = ktesio::contract::reason;
  const std::string_view text = AsText(data, size);
  absl::StatusOr<AdapterDeclaration> parsed = ParseManifest(text, "fuzz.toml");
  if (!parsed.ok()) {
    const std::string reason = ErrorReason(parsed.status());
    const std::string message(parsed.status().message());
    if (reason == reason::kContractIncompatible) {
      Check(parsed.status().code() == absl::StatusCode::kFailedPrecondition);
      Check(message.rfind("incompatible adapter contract: manifest declares ", 0) == 0);
    } else {
      Check(reason == reason::kManifestInvalid);
      Check(parsed.status().code() == absl::StatusCode::kInvalidArgument);
      Check(message.rfind("fuzz.toml:", 0) == 0);
    }
    return 0;
  }
  Check(ValidateDeclaration(*parsed).ok());
  Check(!parsed->kind.empty() && !parsed->start.exec.empty());
  Check(parsed->capabilities.IsViable());
  std::vector<std::pair<std::string, std::string>> values;
  for (const auto& [key, unused] : parsed->config) {
    values.emplace_back(key, "v");
  }
  RenderedDelivery delivery = RenderDelivery(*parsed, values);
  Check(delivery.unmapped_keys.empty());
  for (const auto& [path, entries] : delivery.files) {
    // ParseManifest rejects conflicting native keys, so every file must render.
    Check(RenderTomlDocument(entries).ok());
  }
  return 0;
}
