#pragma once

// The fake model provider (tests/fixtures/provider/fake_provider.py) as a test fixture, and a
// minimal blocking HTTP/1.1 client for talking to it or to a metering proxy on loopback.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "process.h"

namespace ktesio::testing {

class FakeProvider {
 public:
  // Starts the provider on an ephemeral loopback port (https when cert/key are given) writing
  // its ledger under `dir`. Fails the current test when it does not come up.
  explicit FakeProvider(const std::string& dir, const std::string& tls_cert = "",
                        const std::string& tls_key = "");
  ~FakeProvider();
  FakeProvider(const FakeProvider&) = delete;
  FakeProvider& operator=(const FakeProvider&) = delete;

  bool ok() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT" (or https://localhost:PORT)
  const std::string& ledger_path() const { return ledger_; }

  // The provider's ledger: one entry per model call it answered.
  struct Call {
    std::string path;
    bool reported = false;
    uint64_t input = 0;
    uint64_t output = 0;
    bool include_usage = false;
  };
  std::vector<Call> Calls() const;

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool tls_ = false;
  std::string ledger_;
};

struct HttpResponse {
  int status = 0;                              // 0 when the exchange failed
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  std::string error;
};

// One request on a fresh connection. `headers` are "Name: value" lines.
HttpResponse HttpRequest(uint16_t port, const std::string& method, const std::string& target,
                         const std::string& body = "",
                         const std::vector<std::string>& headers = {});

// Generates a self-signed CA-less certificate for "localhost" into dir (cert.pem, key.pem) with
// the openssl CLI. Returns false when openssl is missing.
bool MakeSelfSignedCert(const std::string& dir);

}  // namespace ktesio::testing
