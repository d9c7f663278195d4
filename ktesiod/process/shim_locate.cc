// Where the daemon finds ktesio-shim: $KTESIO_SHIM, else next to the daemon's own executable
// (the installed layout) or in its build tree's shim/ directory.

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "process/shim_backend.h"

namespace ktesio::daemon::process {

std::string ShimSearch::Problem() const {
  if (!path.empty()) {
    return "";
  }
  return absl::StrCat("ktesio-shim not found; looked in ", absl::StrJoin(candidates, ", "));
}

ShimSearch LocateShim() {
  ShimSearch search;
  auto executable = [](const std::string& path) { return access(path.c_str(), X_OK) == 0; };
  if (const char* env = std::getenv("KTESIO_SHIM"); env != nullptr) {
    if (executable(env)) {
      search.path = env;
      return search;
    }
    search.candidates.push_back(absl::StrCat("$KTESIO_SHIM (", env, ": not executable)"));
  } else {
    search.candidates.push_back("$KTESIO_SHIM (unset)");
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    search.candidates.push_back("the daemon's own directory (/proc/self/exe unreadable)");
    return search;
  }
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& candidate : {dir + "/ktesio-shim", dir + "/shim/ktesio-shim"}) {
    if (executable(candidate)) {
      search.path = candidate;
      return search;
    }
    search.candidates.push_back(candidate);
  }
  return search;
}

}  // namespace ktesio::daemon::process
