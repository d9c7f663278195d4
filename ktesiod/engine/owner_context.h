#pragma once

// What the engine's owners (UsageMeter, CallRecorder) share. Everything here belongs to the
// Engine, lives on its thread and outlives the owners.

#include <memory>

#include "engine/config_bridge.h"
#include "engine/health.h"
#include "spdlog/logger.h"
#include "store/store.h"
#include "time/clock.h"

namespace ktesio::daemon::engine {

struct OwnerContext {
  store::Store* store = nullptr;
  const ConfigBridge* config = nullptr;  // effective config and budget limits
  time::Clock* clock = nullptr;          // now, and retry timers
  Health* health = nullptr;              // problems reported until they are resolved
  std::shared_ptr<spdlog::logger> log;
};

}  // namespace ktesio::daemon::engine
