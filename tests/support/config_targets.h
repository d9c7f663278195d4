#pragma once

// Config mapping targets built directly (not parsed from a manifest), for tests of what renders
// and delivers them.

#include <string>
#include <utility>

#include "ktesio/contract/declaration.h"

namespace ktesio::testing {

inline contract::ConfigTarget EnvTarget(std::string variable) {
  contract::ConfigTarget target;
  target.kind = contract::ConfigTarget::Kind::kEnv;
  target.env = std::move(variable);
  return target;
}

inline contract::ConfigTarget FlagTarget(std::string flag) {
  contract::ConfigTarget target;
  target.kind = contract::ConfigTarget::Kind::kFlag;
  target.flag = std::move(flag);
  return target;
}

inline contract::ConfigTarget FileTarget(std::string path, std::string key) {
  contract::ConfigTarget target;
  target.kind = contract::ConfigTarget::Kind::kFile;
  target.file_path = std::move(path);
  target.file_key = std::move(key);
  return target;
}

}  // namespace ktesio::testing
