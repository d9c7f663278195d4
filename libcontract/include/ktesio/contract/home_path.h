#pragma once

// Lexical confinement of paths inside an Agent Home.
//
// This is the pure half of the confinement rule for `file` config targets: it runs when a
// manifest is loaded and needs no filesystem. The other half — that no existing symlink along
// the path leads out of the home — needs the filesystem, so the daemon checks it at registration
// and again at delivery time, just before it writes the rendered file.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ktesio::contract {

// Normalizes `path`, a path relative to the Agent Home, lexically: '/' and '\' both separate
// segments, empty and "." segments are dropped and ".." removes the previous segment. The result
// uses '/' separators and has no leading, trailing or doubled separators, e.g.
// "config/./agent.toml" -> "config/agent.toml", "a/../b.toml" -> "b.toml".
//
// Returns InvalidArgument (reason MANIFEST_INVALID) when `path` is empty, contains a NUL byte,
// is absolute (starts with '/' or '\', which covers UNC "\\server\share" and "//server"), starts
// with a Windows drive ("C:", "C:\x", "C:x"), escapes the home through "..", or normalizes to the
// home itself (".", "a/.."), or when its first segment is one of the engine's own entries in the
// home (kEngineOwnedHomeEntries, compared without case).
absl::StatusOr<std::string> NormalizeHomeRelativePath(std::string_view path);

// What the engine writes in an Agent Home itself; no `file` target may name these or lie below.
inline constexpr std::string_view kEngineOwnedHomeEntries[] = {
    "adapter.json", "config.toml", "effective-config.json", "logs", "run", "memory"};

}  // namespace ktesio::contract
