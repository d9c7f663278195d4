#pragma once

// Reading an adapter.toml for `agent register --manifest` and `manifest lint`: DIR means
// DIR/adapter.toml; the file must be a regular file of at most kMaxManifestBytes of UTF-8 text.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "ktesio/contract/manifest.h"

namespace ktesio::cli {

using contract::kMaxManifestBytes;  // 1 MiB: a manifest is a few KiB

struct ManifestText {
  std::string path;  // the file actually read
  std::string content;
};

// Errors (with the stable reason): NOT_FOUND/MANIFEST_NOT_FOUND when there is no file at the
// path; INVALID_ARGUMENT/MANIFEST_INVALID when it is not a regular file (a device or FIFO would
// never end), is empty, is larger than kMaxManifestBytes, or is not valid UTF-8 (TOML is UTF-8).
absl::StatusOr<ManifestText> ReadManifestFile(std::string path);

}  // namespace ktesio::cli
