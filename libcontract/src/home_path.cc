#include "ktesio/contract/home_path.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/text.h"

namespace ktesio::contract {

using text::Cat;
using text::Escape;
using text::Join;
namespace {

absl::Status Reject(std::string_view path, std::string_view why) {
  return MakeError(absl::StatusCode::kInvalidArgument, reason::kManifestInvalid,
                   Cat("file path '", Escape(path), "' must stay inside the Agent Home: ", why));
}

bool IsSeparator(char c) { return c == '/' || c == '\\'; }

}  // namespace

absl::StatusOr<std::string> NormalizeHomeRelativePath(std::string_view path) {
  if (path.empty()) {
    return Reject(path, "it is empty");
  }
  if (path.find('\0') != std::string_view::npos) {
    return Reject(path, "it contains a NUL byte");
  }
  if (IsSeparator(path[0])) {
    return Reject(path, "it is absolute");
  }
  if (path.size() >= 2 && absl::ascii_isalpha(static_cast<unsigned char>(path[0])) &&
      path[1] == ':') {
    return Reject(path, "it names a Windows drive");
  }
  std::vector<std::string_view> segments;
  size_t start = 0;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && !IsSeparator(path[i])) {
      continue;
    }
    const std::string_view segment = path.substr(start, i - start);
    start = i + 1;
    if (segment.empty() || segment == ".") {
      continue;
    }
    if (segment == "..") {
      if (segments.empty()) {
        return Reject(path, "'..' leads out of it");
      }
      segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  if (segments.empty()) {
    return Reject(path, "it names the home itself, not a file");
  }
  // The engine's own files and directories in the home: a rendered target there would overwrite
  // the registration, the operator's config or the logs (compared without case, for the
  // file systems that ignore it).
  for (std::string_view owned : kEngineOwnedHomeEntries) {
    if (absl::EqualsIgnoreCase(absl::string_view(segments[0].data(), segments[0].size()),
                               absl::string_view(owned.data(), owned.size()))) {
      return Reject(path, Cat("'", owned, "' is the engine's own"));
    }
  }
  return Join(segments, "/");
}

}  // namespace ktesio::contract
