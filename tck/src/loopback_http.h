#pragma once

// The kit's own model provider and HTTP client for the metering_engine_observed section: a
// minimal HTTP/1.1 server on 127.0.0.1 answering OpenAI chat completions with a known usage
// (or none, for the model "tck-no-usage"), and a one-shot POST. Loopback plain HTTP only.

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ktesio::tck {

class LoopbackProvider {
 public:
  static constexpr uint64_t kInputTokens = 123;
  static constexpr uint64_t kOutputTokens = 45;

  LoopbackProvider();  // listens on an ephemeral port; port() == 0 when that failed
  ~LoopbackProvider();
  LoopbackProvider(const LoopbackProvider&) = delete;
  LoopbackProvider& operator=(const LoopbackProvider&) = delete;

  uint16_t port() const { return port_; }
  // Request targets seen, in order.
  std::vector<std::string> Targets() const;

 private:
  void Serve();
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// POSTs `body` as JSON to `url` ("http://127.0.0.1:PORT/path"). Returns the status, or -1 with
// `error` set.
int LoopbackPost(const std::string& url, const std::string& body, std::string* error);

}  // namespace ktesio::tck
