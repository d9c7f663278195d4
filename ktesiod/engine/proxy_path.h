#pragma once

// Who may use an agent's metering proxy (docs/metering.md "Who may use a proxy"): every
// engine-observed instance's base URL carries a path prefix only the daemon and the agent know,
// /kt-<32 hex>, derived from a per-daemon key so it survives daemon restarts (a re-adopted agent
// keeps its URL) and differs per instance and per registration.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ktesio::daemon::engine {

struct ProxyKey {
  std::string key;           // 32 random bytes
  bool created_now = false;  // no key existed: agents running now were given prefix-less URLs
};

// Reads <state_dir>/proxy.key, creating it (0600, 32 bytes from the OS's random source) when
// missing. Errors: INTERNAL/IO_ERROR, or a key file of another size (FAILED_PRECONDITION).
absl::StatusOr<ProxyKey> LoadProxyKey(const std::string& state_dir);

// "/kt-" + the first 32 hex digits of HMAC-SHA256(key, name "\0" registered_at_ms).
std::string ProxyPathPrefix(const std::string& key, const std::string& name,
                            int64_t registered_at_ms);

}  // namespace ktesio::daemon::engine
