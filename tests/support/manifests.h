#pragma once

// Manifests the contract tests share.

namespace ktesio::testing {

// The smallest valid adapter.toml (9 lines); tests append sections to it, which then start at
// line 10.
inline constexpr char kMinimalManifest[] = R"(contract_version = "1.0.0"
[adapter]
kind = "k"
[lifecycle.start]
exec = "x"
[capabilities.pause]
linux = "guaranteed"
[metering]
source = "self-reported"
)";

}  // namespace ktesio::testing
