#include "config/delivery_files.h"

#include <sys/stat.h>

#include "config/errors.h"
#include "fs/fs.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::config {

using internal::Cat;

namespace {

// Both kinds of file are rendered again at every start, and are almost always what the previous
// start wrote: then one read replaces a write, a rename and a directory update (about a tenth of
// a start's cost in the engine). Anything else (another size, mode or content, a non-regular
// file) is written again, atomically: atomic is enough, an fsync per start is not needed.
absl::Status WriteIfChanged(const std::string& path, const std::string& content) {
  struct stat info {};
  if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && (info.st_mode & 07777) == 0600 &&
      static_cast<size_t>(info.st_size) == content.size()) {
    absl::StatusOr<std::string> existing = fs::ReadRegularFile(path, content.size());
    if (existing.ok() && *existing == content) {
      return absl::OkStatus();
    }
  }
  return fs::WriteFileAtomic(path, content, 0600, fs::Durability::kAtomicOnly);
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ReadExistingTargets(
    const std::string& home, const std::vector<std::string>& relative_paths) {
  std::map<std::string, std::string> existing;
  for (const std::string& relative : relative_paths) {
    KT_RETURN_IF_ERROR(fs::CheckConfined(home, relative));
    // The agent may have replaced its file with a FIFO or a device: never block or flood on it.
    absl::StatusOr<std::string> content =
        fs::ReadRegularFile(Cat(home, "/", relative), fs::kMaxConfigFileBytes);
    if (absl::IsNotFound(content.status())) {
      continue;
    }
    if (!content.ok()) {
      return content.status();
    }
    existing.emplace(relative, *std::move(content));
  }
  return existing;
}

absl::Status WriteDeliveredFiles(const std::string& home, const DeliveryPlan& plan) {
  for (const auto& [relative, document] : plan.files) {
    KT_RETURN_IF_ERROR(fs::CheckConfined(home, relative));
    const std::string path = Cat(home, "/", relative);
    const size_t slash = path.rfind('/');
    KT_RETURN_IF_ERROR(fs::MakeDirs(path.substr(0, slash), 0700));
    KT_RETURN_IF_ERROR(WriteIfChanged(path, document));
  }
  const std::string snapshot(kEffectiveConfigFileName);
  KT_RETURN_IF_ERROR(fs::CheckConfined(home, snapshot));
  return WriteIfChanged(Cat(home, "/", snapshot), plan.effective_config_json);
}

}  // namespace ktesio::daemon::config
