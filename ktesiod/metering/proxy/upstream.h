#pragma once

// The upstream a metering proxy forwards to, parsed from `metering.upstream_base_url`.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::daemon::metering {

struct Upstream {
  bool tls = false;
  std::string host;         // name or address (IPv6 without brackets)
  std::string port;         // "443" / "80" when the URL has none
  std::string host_header;  // Host as the upstream expects it ("api.example.com", "[::1]:8080")
  std::string base_path;    // "" or "/v1" (no trailing slash)
  std::string base_query;   // "" or "api-version=1" (appended to every forwarded target)

  // The target sent upstream for a client's request target ("/chat/completions?x=1").
  std::string TargetFor(std::string_view client_target) const;
  // The same, appended to `out`.
  void AppendTargetFor(std::string_view client_target, std::string& out) const;
};

// Parses an http:// or https:// URL without userinfo or fragment. Errors: INVALID_ARGUMENT with
// reason CONFIG_INVALID naming `key` and the problem — never echoing the URL, which may embed a
// credential in its query.
absl::StatusOr<Upstream> ParseUpstream(std::string_view key, std::string_view url);

}  // namespace ktesio::daemon::metering
