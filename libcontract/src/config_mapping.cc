#include "ktesio/contract/config_mapping.h"

#include <algorithm>

#include "ktesio/contract/validation.h"

namespace ktesio::contract {

namespace {

constexpr std::string_view kPassThroughPrefix = "agent.";

// Sorted (DocumentedConfigKeys promises it).
constexpr std::string_view kDocumentedKeys[] = {
    "autostart",
    "budget.breach_action",
    "budget.dollars.cumulative",
    "budget.dollars.per_run",
    "budget.tokens.cumulative",
    "budget.tokens.per_run",
    "cost.rate.input",
    "cost.rate.output",
    "logs.keep",
    "logs.max_bytes",
    "memory.dir",
    "metering.base_url",
    "metering.upstream_base_url",
    "model",
    "restart.backoff_initial_ms",
    "restart.backoff_max_ms",
    "restart.max_consecutive",
    "restart.policy",
    "restart.reset_after_ms",
};

}  // namespace

std::span<const std::string_view> DocumentedConfigKeys() { return kDocumentedKeys; }

bool IsMappableConfigKey(std::string_view key) {
  if (key.starts_with(kPassThroughPrefix)) {
    return IsValidEnvVarName(key.substr(kPassThroughPrefix.size()));
  }
  return std::binary_search(std::begin(kDocumentedKeys), std::end(kDocumentedKeys), key);
}

RenderedDelivery RenderDelivery(const AdapterDeclaration& declaration,
                                const std::vector<std::pair<std::string, std::string>>& values) {
  std::map<std::string, std::string> by_key;
  for (const auto& [key, value] : values) {
    by_key[key] = value;
  }
  RenderedDelivery delivery;
  // Pass-through first, so an explicit env mapping of the same variable overwrites it below.
  constexpr std::string_view kPassThrough = "agent.";
  for (const auto& [key, value] : by_key) {
    if (declaration.config.count(key) > 0 || !key.starts_with(kPassThrough)) {
      continue;
    }
    const std::string tail = key.substr(kPassThrough.size());
    if (IsValidEnvVarName(tail)) {
      delivery.env[tail] = value;
    } else {
      delivery.invalid_passthrough_keys.push_back(key);
    }
  }
  for (const auto& [key, value] : by_key) {
    auto it = declaration.config.find(key);
    if (it == declaration.config.end()) {
      if (!key.starts_with(kPassThrough)) {
        delivery.unmapped_keys.push_back(key);
      }
      continue;
    }
    const ConfigTarget& target = it->second;
    switch (target.kind) {
      case ConfigTarget::Kind::kEnv:
        delivery.env[target.env] = value;
        break;
      case ConfigTarget::Kind::kFlag:
        delivery.argv_tail.push_back(target.flag);
        delivery.argv_tail.push_back(value);
        break;
      case ConfigTarget::Kind::kFile:
        delivery.files[target.file_path].emplace_back(target.file_key, value);
        break;
    }
  }
  return delivery;
}

std::vector<std::string> FindEnvPlaceholders(std::string_view value) {
  constexpr std::string_view kOpen = "{env:";
  std::vector<std::string> names;
  size_t pos = 0;
  while ((pos = value.find(kOpen, pos)) != std::string_view::npos) {
    const size_t name_start = pos + kOpen.size();
    const size_t close = value.find('}', name_start);
    if (close == std::string_view::npos) {
      break;
    }
    if (close == name_start) {
      pos = name_start;
      continue;
    }
    std::string name(value.substr(name_start, close - name_start));
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(std::move(name));
    }
    pos = close + 1;
  }
  return names;
}

}  // namespace ktesio::contract
