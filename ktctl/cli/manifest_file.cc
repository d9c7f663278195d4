#include "cli/manifest_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {

absl::StatusOr<ManifestText> ReadManifestFile(std::string path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    path = absl::StrCat(path, path.back() == '/' ? "" : "/", "adapter.toml");
  }
  auto invalid = [&](const std::string& why) {
    return contract::MakeError(absl::StatusCode::kInvalidArgument,
                               contract::reason::kManifestInvalid, absl::StrCat(path, ": ", why));
  };
  // Not found (exit 3) only when nothing is there; a file that is there but cannot be read is
  // an unreadable manifest (exit 1), as product.md's exit table sorts them.
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      return invalid(absl::StrCat("cannot be read: ", std::strerror(errno)));
    }
    return contract::MakeError(absl::StatusCode::kNotFound, contract::reason::kManifestNotFound,
                               absl::StrCat("no adapter.toml at ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid("not a regular file");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return invalid(absl::StrCat("cannot be read: ", std::strerror(errno)));
  }
  ManifestText text{path, std::string(kMaxManifestBytes + 1, '\0')};
  file.read(text.content.data(), static_cast<std::streamsize>(text.content.size()));
  text.content.resize(static_cast<size_t>(file.gcount()));
  if (text.content.size() > kMaxManifestBytes) {
    return invalid(absl::StrCat("larger than ", kMaxManifestBytes / 1024, " KiB"));
  }
  if (text.content.empty()) {
    return invalid("the manifest is empty");
  }
  if (std::optional<size_t> bad = contract::FirstInvalidUtf8(text.content)) {
    return invalid(absl::StrCat("not valid UTF-8 (byte ", *bad, "); TOML is UTF-8 text"));
  }
  return text;
}

}  // namespace ktesio::cli
