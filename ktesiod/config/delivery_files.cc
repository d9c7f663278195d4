#include "config/delivery_files.h"

#include "config/text.h"
#include "fs/fs.h"

namespace ktesio::daemon::config {

using internal::Cat;

absl::StatusOr<std::map<std::string, std::string>> ReadExistingTargets(
    const std::string& home, const std::vector<std::string>& relative_paths) {
  std::map<std::string, std::string> existing;
  for (const std::string& relative : relative_paths) {
    if (absl::Status status = fs::CheckConfined(home, relative); !status.ok()) {
      return status;
    }
    absl::StatusOr<std::string> content = fs::ReadFile(Cat(home, "/", relative));
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
    if (absl::Status status = fs::CheckConfined(home, relative); !status.ok()) {
      return status;
    }
    const std::string path = Cat(home, "/", relative);
    const size_t slash = path.rfind('/');
    if (absl::Status status = fs::MakeDirs(path.substr(0, slash), 0700); !status.ok()) {
      return status;
    }
    if (absl::Status status =
            fs::WriteFileAtomic(path, document, 0600, fs::Durability::kAtomicOnly);
        !status.ok()) {
      return status;
    }
  }
  const std::string snapshot(kEffectiveConfigFileName);
  if (absl::Status status = fs::CheckConfined(home, snapshot); !status.ok()) {
    return status;
  }
  // Both are rendered again at every start: atomic is enough, an fsync per start is not needed.
  return fs::WriteFileAtomic(Cat(home, "/", snapshot), plan.effective_config_json, 0600,
                             fs::Durability::kAtomicOnly);
}

}  // namespace ktesio::daemon::config
