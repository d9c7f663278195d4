#pragma once

// Limits the daemon enforces on what clients send and ktctl checks before sending (so an
// oversized value gets a plain usage error instead of the transport's message-size error).

#include <cstddef>

namespace ktesio::contract {

// `agent send`: one line of at most this many bytes (the newline the daemon appends excluded).
inline constexpr std::size_t kMaxSendBytes = 1 << 20;

// `secret set`: the longest secret value stored.
inline constexpr std::size_t kMaxSecretBytes = 64 * 1024;

// The largest request message the daemon's gRPC server accepts (gRPC's default is 4 MiB). A fleet
// file may be 4 MiB and its request carries a source location per key, several times the text.
inline constexpr std::size_t kMaxRequestBytes = 64 << 20;

}  // namespace ktesio::contract
