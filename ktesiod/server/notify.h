#pragma once

#include <string_view>

namespace ktesio::daemon::server {

// Sends `state` (e.g. "READY=1") to the service manager when $NOTIFY_SOCKET is set
// (systemd Type=notify). Returns false when unset or the send failed; never throws.
bool NotifyServiceManager(std::string_view state);

}  // namespace ktesio::daemon::server
