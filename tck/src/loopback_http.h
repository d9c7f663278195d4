#pragma once

// The kit's own model provider and HTTP client for the metering_engine_observed section (and for
// engine-observed subjects in subject mode): an HTTP/1.1 server on 127.0.0.1 answering OpenAI
// chat completions with a known usage (or none, for the model "tck-no-usage"), and a one-shot
// POST. Loopback plain HTTP only, on Boost.Beast; malformed input is an error, never a throw.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ktesio::tck {

// Answers each request on its own connection ("Connection: close"): 200 with a chat completion
// whose usage is kInputTokens/kOutputTokens, or without usage when the JSON body's "model" is
// "tck-no-usage"; 400 to a request that does not parse. Records the target of every request
// that parsed. Serves on its own thread until destroyed. Thread-safe.
class LoopbackProvider {
 public:
  static constexpr uint64_t kInputTokens = 123;
  static constexpr uint64_t kOutputTokens = 45;

  // Listens on 127.0.0.1 at an ephemeral port. UNAVAILABLE when it cannot.
  static absl::StatusOr<std::unique_ptr<LoopbackProvider>> Start();
  // Stops serving; a request in flight is dropped.
  ~LoopbackProvider();
  LoopbackProvider(const LoopbackProvider&) = delete;
  LoopbackProvider& operator=(const LoopbackProvider&) = delete;

  uint16_t port() const { return port_; }
  // Request targets seen, in order of arrival.
  std::vector<std::string> Targets() const;

 private:
  struct Server;  // the Asio side: io_context, acceptor and the serving thread

  LoopbackProvider();
  void Record(std::string target);

  mutable absl::Mutex mu_;
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  uint16_t port_ = 0;
  std::unique_ptr<Server> server_;  // last: destroyed (thread joined) first
};

// POSTs `body` as JSON to `url` ("http://127.0.0.1:PORT/path") and returns the HTTP status of
// the answer. INVALID_ARGUMENT when `url` is not of that form; UNAVAILABLE when the connection
// fails, no well-formed HTTP response arrives within 10 s (the message says which).
absl::StatusOr<int> LoopbackPost(const std::string& url, const std::string& body);

}  // namespace ktesio::tck
