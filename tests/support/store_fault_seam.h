#pragma once

// The store's test-only fault seam (KTESIO_TEST_STORE_FAULT_FILE) inside a unit test process:
// while the file exists, every commit is refused as on a failing disk. The store reads the
// variable once, at its first commit, so including this header arms it before main().

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ktesio::testing {

inline const std::string& StoreFaultFile() {
  static const std::string path = "/tmp/kt-store-fault-" + std::to_string(getpid());
  return path;
}

// Commits fail from now on (true) or succeed again (false).
inline void SetStoreFault(bool on) {
  if (on) {
    std::ofstream(StoreFaultFile()).put('x');
  } else {
    std::filesystem::remove(StoreFaultFile());
  }
}

inline const bool kStoreFaultSeamArmed = [] {
  setenv("KTESIO_TEST_STORE_FAULT_FILE", StoreFaultFile().c_str(), 1);
  return true;
}();

}  // namespace ktesio::testing
