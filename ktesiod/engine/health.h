#pragma once

// What keeps the daemon from doing its job, by component ("shim", "store", ...). The daemon
// stays up and answers while degraded; `daemon status` lists the problems and the gRPC health
// service reports the agent service NOT_SERVING until every problem is resolved.
//
// Thread-safety: owner thread only; the observer runs on the thread that changed the set.

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ktesio::daemon::engine {

class Health {
 public:
  // Called with the new degraded flag whenever it flips (and once when set).
  void SetObserver(std::function<void(bool degraded)> observer);

  // Records (or, with an empty message, clears) the problem of `component`.
  void Set(const std::string& component, const std::string& problem);

  bool degraded() const { return !problems_.empty(); }
  // The problems, one sentence each, ordered by component.
  std::vector<std::string> Problems() const;

 private:
  std::map<std::string, std::string> problems_;
  std::function<void(bool)> observer_;
};

}  // namespace ktesio::daemon::engine
