#include "config/delivery_files.h"

#include "config/errors.h"
#include "fs/fs.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::config {

using internal::Cat;

absl::StatusOr<std::map<std::string, std::string>> ReadExistingTargets(
    const std::string& home, const std::vector<std::string>& relative_paths) {
  std::map<std::string, std::string> existing;
  for (const std::string& relative : relative_paths) {
    KT_RETURN_IF_ERROR(fs::CheckConfined(home, relative));
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
    KT_RETURN_IF_ERROR(fs::CheckConfined(home, relative));
    const std::string path = Cat(home, "/", relative);
    const size_t slash = path.rfind('/');
    KT_RETURN_IF_ERROR(fs::MakeDirs(path.substr(0, slash), 0700));
    KT_RETURN_IF_ERROR(fs::WriteFileAtomic(path, document, 0600, fs::Durability::kAtomicOnly));
  }
  const std::string snapshot(kEffectiveConfigFileName);
  KT_RETURN_IF_ERROR(fs::CheckConfined(home, snapshot));
  // Both are rendered again at every start: atomic is enough, an fsync per start is not needed.
  return fs::WriteFileAtomic(Cat(home, "/", snapshot), plan.effective_config_json, 0600,
                             fs::Durability::kAtomicOnly);
}

}  // namespace ktesio::daemon::config
