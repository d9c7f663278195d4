#include "engine/health.h"

namespace ktesio::daemon::engine {

void Health::SetObserver(std::function<void(bool degraded)> observer) {
  observer_ = std::move(observer);
  if (observer_) {
    observer_(degraded());
  }
}

void Health::Set(const std::string& component, const std::string& problem) {
  const bool was = degraded();
  if (problem.empty()) {
    problems_.erase(component);
  } else {
    problems_[component] = problem;
  }
  if (observer_ && was != degraded()) {
    observer_(degraded());
  }
}

std::vector<std::string> Health::Problems() const {
  std::vector<std::string> out;
  out.reserve(problems_.size());
  for (const auto& [component, problem] : problems_) {
    out.push_back(problem);
  }
  return out;
}

}  // namespace ktesio::daemon::engine
