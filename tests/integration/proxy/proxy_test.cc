// The metering proxy over real loopback sockets against the fake provider (a real HTTP server
// in another process): forwarding, streaming, usage per format, honest failures, TLS.

#include "metering/proxy/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_provider.h"
#include "gtest/gtest.h"
#include "json.h"
#include "openssl/evp.h"
#include "process.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/spdlog.h"

namespace ktesio::daemon::metering {
namespace {

using testing::FakeProvider;
using testing::HttpRequest;
using testing::HttpResponse;
using testing::TempDir;
using testing::WaitFor;

// A raw TCP connection to 127.0.0.1:port (for bytes no HTTP client would send), or -1.
int ConnectLoopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// ConnectLoopback, with reads that give up after 20 s (a test fails instead of hanging).
int ConnectWithReadTimeout(uint16_t port) {
  const int fd = ConnectLoopback(port);
  if (fd >= 0) {
    timeval timeout{20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  return fd;
}

// Writes all of `bytes` to `fd` in one call (a request a test sends whole); false when it could
// not. MSG_NOSIGNAL: a proxy that closed the connection fails the send, not the test process.
bool SendWhole(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(provider_.ok()); }

  std::unique_ptr<MeteringProxy> MakeProxy(ProxyOptions options = {}) {
    auto proxy = MeteringProxy::Create(
        std::move(options),
        [this](std::vector<CallRecord> batch) {
          EXPECT_FALSE(batch.empty());  // a report window with no calls hands nothing over
          std::lock_guard lock(mu_);
          batches_.push_back(batch.size());
          for (CallRecord& record : batch) {
            records_.push_back(std::move(record));
          }
        },
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()));
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    return proxy.ok() ? std::move(*proxy) : nullptr;
  }

  uint16_t OpenFor(MeteringProxy& proxy, const std::string& url) {
    absl::StatusOr<Upstream> upstream = ParseUpstream("metering.upstream_base_url", url);
    EXPECT_TRUE(upstream.ok()) << upstream.status();
    absl::StatusOr<uint16_t> port = proxy.Open("agent", *upstream, 0, false);
    EXPECT_TRUE(port.ok()) << port.status();
    return port.ok() ? *port : 0;
  }

  std::vector<CallRecord> Records(size_t at_least) {
    WaitFor([&] {
      std::lock_guard lock(mu_);
      return records_.size() >= at_least;
    });
    std::lock_guard lock(mu_);
    return records_;
  }

  // Exactly `calls` calls were recorded for "agent", each with the usage the provider reported.
  void ExpectKnownUsageAsTheProviderReported(size_t calls) {
    std::vector<CallRecord> records = Records(calls);
    std::vector<FakeProvider::Call> reported = provider_.Calls();
    ASSERT_EQ(records.size(), calls);
    ASSERT_EQ(reported.size(), calls);
    for (size_t i = 0; i < calls; ++i) {
      EXPECT_TRUE(records[i].known);
      EXPECT_EQ(records[i].usage.input, reported[i].input) << reported[i].path;
      EXPECT_EQ(records[i].usage.output, reported[i].output) << reported[i].path;
      EXPECT_EQ(records[i].instance, "agent");
    }
  }

  TempDir dir_;
  FakeProvider provider_{dir_.path()};
  std::mutex mu_;
  std::vector<CallRecord> records_;
  std::vector<size_t> batches_;  // how many records each on_call brought
};

TEST_F(ProxyTest, ParseUpstreamAcceptsProviderUrlsAndRejectsCredentials) {
  absl::StatusOr<Upstream> u = ParseUpstream("k", "https://api.example.com/v1/?api-version=2");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->host_header, "api.example.com");
  EXPECT_EQ(u->TargetFor("/chat/completions"), "/v1/chat/completions?api-version=2");
  EXPECT_EQ(u->TargetFor("/models?x=1"), "/v1/models?x=1&api-version=2");
  u = ParseUpstream("k", "http://[::1]:8080");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "8080");
  for (const char* bad : {"", "ftp://x", "http://user:sk-secret@host/v1", "http://host:0",
                          "http://host:99999", "http:///v1", "http://host/#frag", "http://ho st"}) {
    absl::StatusOr<Upstream> parsed = ParseUpstream("metering.upstream_base_url", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(std::string(parsed.status().message()).find("metering.upstream_base_url"),
              std::string::npos);
    EXPECT_EQ(std::string(parsed.status().message()).find("sk-secret"), std::string::npos);
  }
}

TEST_F(ProxyTest, NonStreamingCallsOfEveryFormatAreMeteredAsReported) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  for (const char* path : {"/chat/completions", "/responses", "/messages"}) {
    HttpResponse r = HttpRequest(port, "POST", path, R"({"model":"m","input":"hello"})",
                                 {"Content-Type: application/json"});
    EXPECT_EQ(r.status, 200) << path << r.error;
  }
  ExpectKnownUsageAsTheProviderReported(3);
}

// A response body without a length that ends when the provider closes its connection reaches
// the agent whole, and its usage counts (the end of the stream completes the message).
TEST_F(ProxyTest, ABodyEndedByTheProvidersCloseIsRelayedWholeAndMetered) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  for (int i = 0; i < 2; ++i) {  // the second call needs a new provider connection
    HttpResponse r = HttpRequest(port, "POST", "/chat/completions", R"({"model":"until-close"})");
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.error, "");
    EXPECT_NE(r.body.find(R"("completion_tokens")"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.back(), '}') << r.body;
  }
  ExpectKnownUsageAsTheProviderReported(2);
}

// The calls that finish within one report window reach the engine in one hand-over.
TEST_F(ProxyTest, CallsFinishingWithinOneReportWindowAreHandedOverTogether) {
  ProxyOptions options;
  options.report_window = std::chrono::milliseconds(3000);  // far longer than three local calls
  auto proxy = MakeProxy(options);
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  const auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = HttpRequest(port, "POST", "/chat/completions", R"({"model":"m"})",
                                 {"Content-Type: application/json"});
    ASSERT_EQ(r.status, 200) << r.error;
  }
  const auto elapsed = std::chrono::steady_clock::now() - first;
  std::vector<CallRecord> records = Records(3);
  ASSERT_EQ(records.size(), 3u);
  std::lock_guard lock(mu_);
  if (elapsed < std::chrono::milliseconds(2500)) {  // else the window may have closed between
    EXPECT_EQ(batches_, (std::vector<size_t>{3}));
  }
  EXPECT_EQ(records_.size(), 3u);
}

TEST_F(ProxyTest, StreamingChatGetsIncludeUsageInjectedAndTheExtraChunkStripped) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  HttpResponse r = HttpRequest(port, "POST", "/chat/completions",
                               R"({"model":"m","stream":true,"messages":[]})");
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(r.body.find("\"choices\": []"), std::string::npos) << "usage chunk not asked for";
  EXPECT_NE(r.body.find("wor"), std::string::npos);
  // The client that asks gets the usage chunk.
  HttpResponse asked =
      HttpRequest(port, "POST", "/chat/completions",
                  R"({"model":"m","stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(asked.status, 200);
  EXPECT_NE(asked.body.find("\"choices\": []"), std::string::npos);
  std::vector<CallRecord> records = Records(2);
  std::vector<FakeProvider::Call> calls = provider_.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[0].include_usage) << "the proxy asked on the client's behalf";
  ASSERT_EQ(records.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(records[i].known);
    EXPECT_EQ(records[i].usage.input, calls[i].input);
    EXPECT_EQ(records[i].usage.output, calls[i].output);
  }
}

TEST_F(ProxyTest, StreamingResponsesAndAnthropicAreMetered) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  ASSERT_EQ(HttpRequest(port, "POST", "/v1/responses", R"({"model":"m","stream":true})").status,
            200);
  HttpResponse anthropic =
      HttpRequest(port, "POST", "/v1/messages", R"({"model":"m","stream":true,"max_tokens":9})");
  ASSERT_EQ(anthropic.status, 200);
  EXPECT_NE(anthropic.body.find("message_stop"), std::string::npos);
  std::vector<CallRecord> records = Records(2);
  std::vector<FakeProvider::Call> calls = provider_.Calls();
  ASSERT_EQ(records.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(records[i].known) << calls[i].path;
    EXPECT_EQ(records[i].usage.input, calls[i].input) << calls[i].path;
    EXPECT_EQ(records[i].usage.output, calls[i].output) << "overwrite, not add: " << calls[i].path;
  }
  EXPECT_EQ(records[1].shape, ApiShape::kAnthropicMessages);
}

TEST_F(ProxyTest, AbsentOrCutOffUsageIsUnknownNeverZero) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  EXPECT_EQ(HttpRequest(port, "POST", "/v1/chat/completions", R"({"model":"no-usage"})").status,
            200);
  EXPECT_EQ(
      HttpRequest(port, "POST", "/v1/responses", R"({"model":"no-usage","stream":true})").status,
      200);
  HttpResponse cut = HttpRequest(port, "POST", "/v1/messages", R"({"model":"cut","stream":true})");
  EXPECT_NE(cut.error, "") << "a cut-off stream must reach the client as cut off";
  std::vector<CallRecord> records = Records(3);
  ASSERT_EQ(records.size(), 3u);
  for (const CallRecord& record : records) {
    EXPECT_FALSE(record.known);
  }
}

TEST_F(ProxyTest, NonModelCallsAndErrorsAreRelayedButNotMetered) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  HttpResponse models = HttpRequest(port, "GET", "/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("\"fake\""), std::string::npos);
  HttpResponse denied =
      HttpRequest(port, "POST", "/chat/completions", R"({"model":"unauthorized"})");
  EXPECT_EQ(denied.status, 401);
  EXPECT_NE(denied.body.find("invalid api key"), std::string::npos);
  // A metered call after them shows nothing was recorded for either.
  EXPECT_EQ(HttpRequest(port, "POST", "/chat/completions", R"({"model":"m"})").status, 200);
  std::vector<CallRecord> records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].known);
}

TEST_F(ProxyTest, HeadersAreRelayedMinusHopByHopWithHostRewrittenAndIdentityEncoding) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/base");
  HttpResponse r =
      HttpRequest(port, "PUT", "/echo/x?q=1", "payload",
                  {"Authorization: Bearer sk-test", "Accept-Encoding: gzip, br", "X-Custom: kept",
                   "Connection: X-Drop", "X-Drop: gone", "Keep-Alive: timeout=5",
                   "Proxy-Authorization: Basic abc", "TE: trailers"});
  ASSERT_EQ(r.status, 200) << r.error;
  std::optional<testing::Json> echo = testing::ParseJson(r.body);
  ASSERT_TRUE(echo.has_value()) << r.body;
  const testing::Json& headers = (*echo)["headers"];
  EXPECT_EQ((*echo)["method"].string, "PUT");
  EXPECT_EQ((*echo)["path"].string, "/base/echo/x?q=1");
  EXPECT_EQ((*echo)["body_length"].number, "7");
  EXPECT_EQ(headers["host"].string, "127.0.0.1:" + std::to_string(provider_.port()));
  EXPECT_EQ(headers["authorization"].string, "Bearer sk-test");
  EXPECT_EQ(headers["accept-encoding"].string, "identity");
  EXPECT_EQ(headers["x-custom"].string, "kept");
  for (const char* gone : {"x-drop", "keep-alive", "proxy-authorization", "te"}) {
    EXPECT_EQ(headers.Find(gone), nullptr) << gone;
  }
  EXPECT_EQ(HttpRequest(port, "DELETE", "/echo/y").status, 200);
  EXPECT_EQ(HttpRequest(port, "HEAD", "/anything").status, 200);
}

TEST_F(ProxyTest, StreamsAreRelayedAsTheyArriveNotBuffered) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  // The provider sends the first chunk, then holds the rest until /release: a buffering proxy
  // would never deliver the first chunk, and this read would time out.
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  const std::string body = R"({"model":"gate","stream":true})";
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_TRUE(SendWhole(fd, request));
  std::string received;
  char buffer[4096];
  while (received.find("Hel") == std::string::npos) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0) << "first chunk never arrived: the proxy buffered the stream";
    received.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(received.find("wor"), std::string::npos);
  EXPECT_EQ(HttpRequest(provider_.port(), "GET", "/release").status, 200);
  while (received.find("0\r\n\r\n") == std::string::npos) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0);
    received.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_NE(received.find("[DONE]"), std::string::npos);
  EXPECT_EQ(Records(1).size(), 1u);
}

// Reads from fd until `done` says the bytes so far are complete (or the peer closes/times out).
std::string ReadUntil(int fd, const std::function<bool(const std::string&)>& done) {
  std::string received;
  char buffer[8192];
  while (!done(received)) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {
      break;
    }
    received.append(buffer, static_cast<size_t>(n));
  }
  return received;
}

// The proxy writes to the agent as far as its socket takes at once, and waits for the rest only
// when the buffer fills: an agent that reads slowly through a small window gets every byte, in
// order, and the connection stays usable for the next call.
TEST_F(ProxyTest, ResponsesReachASlowReaderWholeAndInOrder) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));  // before connect: the window
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval timeout{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  constexpr size_t kSize = 3u << 20;  // far beyond the proxy's send buffer and the agent's window
  const std::string request = "GET /big?" + std::to_string(kSize) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(SendWhole(fd, request));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the proxy's buffer fill
    const std::string received = ReadUntil(fd, [&](const std::string& got) {
      const size_t head_end = got.find("\r\n\r\n");
      return head_end != std::string::npos && got.size() >= head_end + 4 + kSize;
    });
    const size_t head_end = received.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << "round " << round;
    EXPECT_EQ(received.substr(0, 12), "HTTP/1.1 200");
    const std::string body = received.substr(head_end + 4);
    ASSERT_EQ(body.size(), kSize) << "round " << round;
    size_t wrong = 0;
    for (size_t i = 0; i < body.size(); ++i) {
      wrong += body[i] != static_cast<char>('0' + i % 10) ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
  close(fd);
}

// The agent's request body may come with its head, after it, in pieces, or chunked; large bodies
// fill the proxy's socket to the provider. Each way, the provider gets the whole body once.
TEST_F(ProxyTest, RequestBodiesArriveWholeHoweverTheAgentSendsThem) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  auto echoed_length = [&](const std::string& received) -> long {
    const size_t at = received.find("\"body_length\": ");
    return at == std::string::npos ? -1 : std::stol(received.substr(at + 15));
  };
  // One reply with a Content-Length body (the proxy keeps the provider's framing for those).
  auto reply_complete = [](const std::string& got) {
    const size_t head_end = got.find("\r\n\r\n");
    const size_t length_at = got.find("Content-Length: ");
    return head_end != std::string::npos && length_at < head_end &&
           got.size() >= head_end + 4 + std::stoul(got.substr(length_at + 16));
  };
  auto send_all = [&](const std::string& bytes) {
    // MSG_NOSIGNAL: a proxy that hangs up early fails the test, not the process.
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  };
  // 1. Head and body in one write.
  const std::string small(1000, 'a');
  send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + small);
  EXPECT_EQ(echoed_length(ReadUntil(fd, reply_complete)), 1000);
  // 2. The head, then the body in three pieces with pauses (the proxy must wait for them).
  send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n");
  for (int piece = 0; piece < 3; ++piece) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    send_all(std::string(1000, 'b'));
  }
  EXPECT_EQ(echoed_length(ReadUntil(fd, reply_complete)), 3000);
  // 3. Chunked, the last chunk late.
  send_all(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  send_all("0\r\n\r\n");
  EXPECT_EQ(echoed_length(ReadUntil(fd, reply_complete)), 11);
  // 4. A body of 16 MiB to a provider that reads late: more than the socket to it takes at once.
  const std::string large(16u << 20, 'c');
  std::thread writer([&] {
    send_all("POST /echo?slow HTTP/1.1\r\nHost: x\r\nContent-Length: " +
             std::to_string(large.size()) + "\r\n\r\n" + large);
  });
  const long got = echoed_length(ReadUntil(fd, reply_complete));
  writer.join();
  EXPECT_EQ(got, static_cast<long>(large.size()));
  close(fd);
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EXPECT_EQ(EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr), 1);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

// A body with a declared length is read into place: the bytes of a next request sent in the same
// write stay for that request (pipelining), every byte of the body reaches the provider in order,
// and a body the agent cuts short with its half of the connection gets 400 and goes nowhere.
TEST_F(ProxyTest, ABodyEndsAtItsLengthAndACutOneIsRefused) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  auto field = [](const std::string& received, const std::string& key) {
    const size_t at = received.find("\"" + key + "\": ");
    if (at == std::string::npos) {
      return std::string();
    }
    const size_t from = at + key.size() + 4;
    return received.substr(from, received.find_first_of(",}", from) - from);
  };
  auto replies_complete = [](size_t count) {
    return [count](const std::string& got) {
      size_t at = 0;
      for (size_t i = 0; i < count; ++i) {
        const size_t head_end = got.find("\r\n\r\n", at);
        const size_t length_at = got.find("Content-Length: ", at);
        if (head_end == std::string::npos || length_at > head_end) {
          return false;
        }
        at = head_end + 4 + std::stoul(got.substr(length_at + 16));
        if (got.size() < at) {
          return false;
        }
      }
      return true;
    };
  };
  // Bodies whose every byte depends on its place, of sizes around the proxy's 16 KiB read.
  auto body_of = [](size_t size, int seed) {
    std::string body(size, '\0');
    for (size_t i = 0; i < size; ++i) {
      body[i] = static_cast<char>('a' + (i * 7 + static_cast<size_t>(seed)) % 26);
    }
    return body;
  };
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  // The first body ends inside the proxy's first read, the second beyond it, the third after that.
  const std::vector<std::string> bodies = {body_of(1000, 1), body_of(70000, 2), body_of(16380, 3)};
  std::string all;
  for (const std::string& body : bodies) {
    all += "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  }
  ASSERT_EQ(send(fd, all.data(), all.size(), MSG_NOSIGNAL), static_cast<ssize_t>(all.size()));
  const std::string received = ReadUntil(fd, replies_complete(bodies.size()));
  size_t reply = 0;
  for (const std::string& body : bodies) {
    const size_t next = received.find("HTTP/1.1", reply + 1);
    const std::string one = received.substr(reply, next - reply);
    EXPECT_EQ(field(one, "body_length"), std::to_string(body.size())) << one;
    EXPECT_EQ(field(one, "body_sha256"), "\"" + Sha256Hex(body) + "\"") << one;
    reply = next;
  }
  close(fd);

  const int cut = ConnectWithReadTimeout(port);
  ASSERT_GE(cut, 0);
  const std::string part =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + body_of(3000, 4);
  ASSERT_EQ(send(cut, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  shutdown(cut, SHUT_WR);
  const std::string refused = ReadUntil(
      cut, [](const std::string& got) { return got.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 400") << refused;
  close(cut);
}

// A provider stand-in on a raw socket: the test sees exactly which bytes the proxy sends, and
// when. Reads on an accepted connection give up after 20 s (a test fails instead of hanging).
class RawUpstream {
 public:
  RawUpstream() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        listen(listener_, 8) == 0 &&
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~RawUpstream() { close(listener_); }
  RawUpstream(const RawUpstream&) = delete;
  RawUpstream& operator=(const RawUpstream&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // The next connection from the proxy, waited for up to 20 s; -1 when none came.
  int Accept() const {
    pollfd ready{listener_, POLLIN, 0};
    if (poll(&ready, 1, 20000) != 1) {
      return -1;
    }
    const int fd = accept(listener_, nullptr, nullptr);
    timeval timeout{20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return fd;
  }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
};

// A request's head and the first `body_bytes` of its body (or what came before the peer closed
// or the read timed out).
std::string ReadHeadAnd(int fd, size_t body_bytes) {
  return ReadUntil(fd, [body_bytes](const std::string& got) {
    const size_t head_end = got.find("\r\n\r\n");
    return head_end != std::string::npos && got.size() >= head_end + 4 + body_bytes;
  });
}

std::string BodyOf(const std::string& request) {
  const size_t head_end = request.find("\r\n\r\n");
  return head_end == std::string::npos ? std::string() : request.substr(head_end + 4);
}

// A Responses call with `size` bytes of input, every byte depending on its place.
std::string ResponsesBody(size_t size) {
  std::string input(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    input[i] = static_cast<char>('a' + (i * 7) % 26);
  }
  return R"({"model":"gpt-streamed","input":")" + input + R"("})";
}

// Sends a POST of `body` to `target` in two writes 50 ms apart, the first ending after `first`
// bytes of the body; false when a write failed.
bool SendInPieces(int fd, const std::string& target, const std::string& body, size_t first) {
  const bool head =
      SendWhole(fd, "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, first));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return head && SendWhole(fd, body.substr(first));
}

constexpr std::string_view kResponsesReply =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 71\r\n\r\n"
    R"({"object":"response","usage":{"input_tokens":5,"output_tokens":7}}     )";

bool ReplyComplete(const std::string& got) {
  const size_t head_end = got.find("\r\n\r\n");
  const size_t length_at = got.find("Content-Length: ");
  return head_end != std::string::npos && length_at < head_end &&
         got.size() >= head_end + 4 + std::stoul(got.substr(length_at + 16));
}

// A large body the agent sends in pieces, with pauses, reaches the provider whole: a Responses
// call's byte for byte under the agent's Content-Length (then planned — its model — and metered),
// a streaming chat completion's with include_usage spliced in and its Content-Length to match.
TEST_F(ProxyTest, ABodySentInPiecesReachesTheProviderWholeAndEditedOnlyWhereAsked) {
  RawUpstream upstream;
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, upstream.url());
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  const std::string body = ResponsesBody(100000);
  ASSERT_TRUE(SendInPieces(fd, "/v1/responses", body, 40000));
  const int up = upstream.Accept();
  ASSERT_GE(up, 0);
  const std::string request = ReadHeadAnd(up, body.size());
  EXPECT_TRUE(BodyOf(request) == body) << "the body reached the provider changed";
  EXPECT_NE(request.find("\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"),
            std::string::npos)
      << request.substr(0, request.find("\r\n\r\n"));
  ASSERT_TRUE(SendWhole(up, std::string(kResponsesReply)));
  const std::string reply = ReadUntil(fd, ReplyComplete);
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 200") << reply;
  std::vector<CallRecord> records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].shape, ApiShape::kResponses);
  EXPECT_EQ(records[0].model, "gpt-streamed");
  EXPECT_TRUE(records[0].known);
  EXPECT_EQ(records[0].usage, (TokenUsage{5, 7}));

  // A streaming chat completion in two pieces, the second late, on the same connections.
  const std::string chat = R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" +
                           std::string(60000, 'q') + R"("}]})";
  ASSERT_TRUE(SendInPieces(fd, "/v1/chat/completions", chat, 30000));
  const std::string edited = R"({"stream_options":{"include_usage":true},)" + chat.substr(1);
  const std::string chat_request = ReadHeadAnd(up, edited.size());
  EXPECT_TRUE(BodyOf(chat_request) == edited) << "the chat body was not edited whole";
  EXPECT_NE(chat_request.find("\r\nContent-Length: " + std::to_string(edited.size()) + "\r\n"),
            std::string::npos);
  close(up);
  close(fd);
}

// A chat completion's body is planned as it arrives (searched for "stream", validated): what the
// last piece brings still decides. The provider gets include_usage turned on where the body's
// end asks for it, a body that turns out malformed untouched, and a body whose first piece ended
// inside an escape edited as if it had come whole.
TEST_F(ProxyTest, AChatBodyPlannedAsItArrivesIsEditedAsTheWholeBodySays) {
  RawUpstream upstream;
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, upstream.url());
  const std::string history =
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" +
      std::string(40000, 'q');
  const std::string asks_not = history + R"("}],"stream_options":{"include_usage":false}})";
  const std::string malformed = history + R"("}],})";
  const std::string escaped = history + R"(\uD83D\uDE00"}]})";
  const size_t inside_escape = escaped.find("\\uD83D") + 8;  // between the pair's halves
  struct Case {
    const std::string& body;
    size_t first;
    std::string expected;
  };
  const Case cases[] = {
      {asks_not, 30000, history + R"("}],"stream_options":{"include_usage":true}})"},
      {malformed, 30000, malformed},
      {escaped, inside_escape, R"({"stream_options":{"include_usage":true},)" + escaped.substr(1)},
  };
  for (const Case& c : cases) {
    const int fd = ConnectWithReadTimeout(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendInPieces(fd, "/v1/chat/completions", c.body, c.first));
    const int up = upstream.Accept();
    ASSERT_GE(up, 0);
    const std::string request = ReadHeadAnd(up, c.expected.size());
    const std::string body = BodyOf(request);
    EXPECT_TRUE(body == c.expected)
        << "sent in two pieces at " << c.first << ", the provider got the body ending "
        << body.substr(body.size() > 60 ? body.size() - 60 : 0);
    EXPECT_NE(request.find("\r\nContent-Length: " + std::to_string(c.expected.size()) + "\r\n"),
              std::string::npos);
    close(up);
    close(fd);
  }
}

// A kept-alive provider connection that died while idle is found dead when a large request goes
// out on it: the whole request goes out again on a fresh connection, and the call is answered
// and metered once.
TEST_F(ProxyTest, ALargeRequestIsSentWholeAgainWhenItsKeptConnectionWasDead) {
  RawUpstream upstream;
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, upstream.url());
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendWhole(fd, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  const int first = upstream.Accept();
  ASSERT_GE(first, 0);
  ASSERT_FALSE(ReadHeadAnd(first, 0).empty());
  ASSERT_TRUE(SendWhole(first, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"));
  ASSERT_EQ(ReadUntil(fd, ReplyComplete).substr(0, 12), "HTTP/1.1 200");
  close(first);  // the provider drops the idle connection the proxy keeps

  const std::string body = ResponsesBody(100000);
  ASSERT_TRUE(SendInPieces(fd, "/v1/responses", body, 40000));
  const int second = upstream.Accept();
  ASSERT_GE(second, 0);
  const std::string request = ReadHeadAnd(second, body.size());
  EXPECT_TRUE(BodyOf(request) == body) << "the retried request was not whole";
  ASSERT_TRUE(SendWhole(second, std::string(kResponsesReply)));
  const std::string reply = ReadUntil(fd, ReplyComplete);
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 200") << reply;
  EXPECT_EQ(Records(1).size(), 1u);
  close(second);
  close(fd);
}

// A large body sent in pieces to a provider that cannot be reached, or by an agent whose calls are
// refused, is read to its end before the 502 or the 429: the connection stays in step and serves
// the agent's next call.
TEST_F(ProxyTest, ALargeBodyIsReadWholeBeforeA502OrA429) {
  auto proxy = MakeProxy();
  int probe = socket(AF_INET, SOCK_STREAM, 0);  // a port nothing listens on
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  close(probe);
  const uint16_t dead =
      OpenFor(*proxy, "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1");
  absl::StatusOr<Upstream> provider =
      ParseUpstream("metering.upstream_base_url", provider_.url() + "/v1");
  ASSERT_TRUE(provider.ok());
  absl::StatusOr<uint16_t> blocked = proxy->Open("spent", *provider, 0, false);
  ASSERT_TRUE(blocked.ok());
  proxy->Block("spent");
  const std::string body = ResponsesBody(100000);
  for (const auto& [listener, status] : {std::pair{dead, "502"}, std::pair{*blocked, "429"}}) {
    const int fd = ConnectWithReadTimeout(listener);
    ASSERT_GE(fd, 0);
    for (int call = 0; call < 2; ++call) {
      ASSERT_TRUE(SendInPieces(fd, "/v1/responses", body, 40000));
      const std::string reply = ReadUntil(fd, ReplyComplete);
      EXPECT_EQ(reply.substr(0, 12), std::string("HTTP/1.1 ") + status)
          << "call " << call << ": " << reply;
    }
    close(fd);
  }
  EXPECT_TRUE(provider_.Calls().empty());
}

// Silence in either direction for longer than idle_timeout ends the exchange: a provider that
// stops mid-stream is cut off (the agent gets what came and no terminating chunk; the call is
// recorded with unknown usage), long before the provider would go on.
TEST_F(ProxyTest, ASilentProviderIsCutOffAfterTheIdleTimeout) {
  ProxyOptions options;
  options.idle_timeout = std::chrono::milliseconds(400);
  auto proxy = MakeProxy(options);
  const uint16_t port = OpenFor(*proxy, provider_.url());
  const auto start = std::chrono::steady_clock::now();
  // "gate": the provider sends the first chunk, then waits 30 s for /release.
  HttpResponse r =
      HttpRequest(port, "POST", "/v1/chat/completions", R"({"model":"gate","stream":true})");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(r.error, "") << "the stream must reach the agent as cut off";
  EXPECT_NE(r.body.find("Hel"), std::string::npos) << "what came before the silence is relayed";
  EXPECT_GE(took, std::chrono::milliseconds(350));
  EXPECT_LT(took, std::chrono::seconds(10));
  std::vector<CallRecord> records = Records(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].known);
  EXPECT_EQ(HttpRequest(provider_.port(), "GET", "/release").status, 200);
}

// A connection must bring a request head within header_timeout, the first and every next one:
// an agent that connects and says nothing, or idles after a call, gets its connection closed.
TEST_F(ProxyTest, ConnectionsWithoutAHeadAreClosedAfterTheHeaderTimeout) {
  ProxyOptions options;
  options.header_timeout = std::chrono::milliseconds(300);
  auto proxy = MakeProxy(options);
  const uint16_t port = OpenFor(*proxy, provider_.url());
  auto closed_after = [](int fd) {
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    const auto start = std::chrono::steady_clock::now();
    char byte = 0;
    const ssize_t n = read(fd, &byte, 1);
    EXPECT_EQ(n, 0) << "the proxy closes the connection (no reply)";
    return std::chrono::steady_clock::now() - start;
  };
  const int silent = ConnectLoopback(port);
  ASSERT_GE(silent, 0);
  auto took = closed_after(silent);
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(5));
  close(silent);

  const int idle = ConnectLoopback(port);
  ASSERT_GE(idle, 0);
  const std::string request = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(SendWhole(idle, request));
  const std::string reply = ReadUntil(idle, [](const std::string& got) {
    return got.find("\"fake\"") != std::string::npos && got.back() == '}';
  });
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 200");
  took = closed_after(idle);
  EXPECT_GE(took, std::chrono::milliseconds(250));
  EXPECT_LT(took, std::chrono::seconds(5));
  close(idle);
  EXPECT_EQ(HttpRequest(port, "GET", "/v1/models").status, 200) << "the proxy keeps serving";
}

TEST_F(ProxyTest, UnreachableUpstreamIs502NamingNeitherUrlNorKey) {
  auto proxy = MakeProxy();
  // A port nothing listens on: bind one, note it, close it.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string dead_port = std::to_string(ntohs(addr.sin_port));
  close(probe);
  const uint16_t port = OpenFor(*proxy, "http://127.0.0.1:" + dead_port + "/v1");
  HttpResponse r = HttpRequest(port, "POST", "/chat/completions", R"({"model":"m"})",
                               {"Authorization: Bearer sk-live-SECRET"});
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.body, std::string(kBadGatewayBody));
  EXPECT_EQ(r.body.find(dead_port), std::string::npos);
  EXPECT_EQ(r.body.find("SECRET"), std::string::npos);
}

TEST_F(ProxyTest, OversizedRequestBodyIs413) {
  ProxyOptions options;
  options.max_request_bytes = 1024;
  auto proxy = MakeProxy(options);
  const uint16_t port = OpenFor(*proxy, provider_.url());
  HttpResponse r = HttpRequest(port, "POST", "/v1/chat/completions", std::string(4096, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, std::string(kTooLargeBody));
  // A chunked body declares no length: it is counted as it arrives.
  const int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  const std::string chunked =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1000\r\n" +
      std::string(4096, 'x') + "\r\n0\r\n\r\n";
  ASSERT_EQ(write(fd, chunked.data(), chunked.size()), static_cast<ssize_t>(chunked.size()));
  char buffer[512];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(n)).substr(0, 12), "HTTP/1.1 413");
  close(fd);
  EXPECT_TRUE(provider_.Calls().empty()) << "nothing reached the provider";
}

TEST_F(ProxyTest, MalformedHttpGets400AndTheProxyKeepsServing) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  const int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  const std::string junk = "GARBAGE \x01\x02 NOT-HTTP\r\n\r\n";
  ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
  char buffer[512];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(n)).substr(0, 12), "HTTP/1.1 400");
  close(fd);
  EXPECT_EQ(HttpRequest(port, "GET", "/v1/models").status, 200);
}

// A Transfer-Encoding the proxy cannot relay as sent is answered and the connection closed: the
// body's end is unknown, so bytes after the head are never read as a next request (smuggling).
TEST_F(ProxyTest, ATransferCodingOtherThanChunkedIsRefusedAndTheConnectionClosed) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  const std::string smuggled = "GET /echo?smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const auto& [coding, status] :
       std::vector<std::pair<std::string, std::string>>{{"gzip", "400"},
                                                        {"identity", "400"},
                                                        {"chunked, chunked", "400"},
                                                        {"gzip, chunked", "501"}}) {
    const int fd = ConnectWithReadTimeout(port);
    ASSERT_GE(fd, 0);
    const std::string request =
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + "\r\n\r\n" + smuggled;
    ASSERT_TRUE(SendWhole(fd, request));
    const std::string got = ReadUntil(fd, [](const std::string&) { return false; });
    close(fd);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 " + status) << coding << ": " << got;
    EXPECT_EQ(got.find("HTTP/1.1", 12), std::string::npos) << coding << ": a second reply";
    EXPECT_EQ(got.find("smuggled"), std::string::npos) << coding << ": " << got;
  }
  EXPECT_EQ(HttpRequest(port, "GET", "/v1/models").status, 200);
}

// A chunked body's trailer fields are dropped, not forwarded as header fields.
TEST_F(ProxyTest, ChunkedTrailersAreNotForwardedAsHeaderFields) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  const int fd = ConnectWithReadTimeout(port);
  ASSERT_GE(fd, 0);
  const std::string request =
      "POST /echo HTTP/1.1\r\nHost: x\r\nX-Head: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\nX-Trailer: t1\r\n\r\n";
  ASSERT_TRUE(SendWhole(fd, request));
  const std::string got = ReadUntil(fd, [](const std::string& so_far) {
    return so_far.find("\"body_length\"") != std::string::npos &&
           so_far.find('}', so_far.find("\"body_length\"")) != std::string::npos;
  });
  close(fd);
  EXPECT_NE(got.find("\"x-head\""), std::string::npos) << got;
  EXPECT_EQ(got.find("x-trailer"), std::string::npos) << got;
  EXPECT_NE(got.find("\"body_length\": 5"), std::string::npos) << got;
}

TEST_F(ProxyTest, ConcurrentStreamsFromOneAgentAreAllMetered) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  constexpr int kCalls = 16;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      const std::string body = R"({"model":"m","stream":true,"n":)" + std::to_string(i) + "}";
      if (HttpRequest(port, "POST", "/v1/chat/completions", body).status == 200) {
        ++ok;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(ok.load(), kCalls);
  std::vector<CallRecord> records = Records(kCalls);
  ASSERT_EQ(records.size(), static_cast<size_t>(kCalls));
  uint64_t proxy_input = 0;
  uint64_t provider_input = 0;
  for (const CallRecord& record : records) {
    proxy_input += record.usage.input;
  }
  for (const FakeProvider::Call& call : provider_.Calls()) {
    provider_input += call.input;
  }
  EXPECT_EQ(proxy_input, provider_input);
}

TEST_F(ProxyTest, ClosingTheListenerRefusesNewConnectionsAndPortCanBeReclaimed) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url());
  EXPECT_EQ(proxy->Port("agent"), port);
  proxy->Close("agent");
  EXPECT_EQ(proxy->Port("agent"), 0);
  EXPECT_TRUE(WaitFor([&] { return HttpRequest(port, "GET", "/v1/models").status == 0; }));
  // A re-adopted agent's URL names its old port: the proxy takes exactly that port back.
  absl::StatusOr<Upstream> upstream = ParseUpstream("k", provider_.url());
  absl::StatusOr<uint16_t> again = proxy->Open("agent", *upstream, port, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, port);
  EXPECT_EQ(HttpRequest(port, "GET", "/v1/models").status, 200);
}

// A restart closes the listener and opens it again at once: the port must be free by then, or the
// agent's URL would move (the bind failing on a listener still open on the proxy's thread).
TEST_F(ProxyTest, AListenerClosedIsFreeForAnImmediateReopen) {
  auto proxy = MakeProxy();
  absl::StatusOr<Upstream> upstream = ParseUpstream("k", provider_.url());
  const uint16_t port = OpenFor(*proxy, provider_.url());
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(HttpRequest(port, "GET", "/v1/models").status, 200) << "round " << round;
    proxy->Close("agent");
    absl::StatusOr<uint16_t> again = proxy->Open("agent", *upstream, port, true);
    ASSERT_TRUE(again.ok()) << "round " << round << ": " << again.status();
    ASSERT_EQ(*again, port);
  }
}

TEST_F(ProxyTest, BlockedInstanceGets429ForModelCallsOnly) {
  auto proxy = MakeProxy();
  const uint16_t port = OpenFor(*proxy, provider_.url() + "/v1");
  proxy->Block("agent");
  EXPECT_TRUE(WaitFor([&] {
    return HttpRequest(port, "POST", "/chat/completions", R"({"model":"m"})").status == 429;
  }));
  HttpResponse refused = HttpRequest(port, "POST", "/responses", R"({"model":"m"})");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.body, std::string(kBudgetBody));
  EXPECT_EQ(HttpRequest(port, "GET", "/models").status, 200) << "non-model calls still pass";
  EXPECT_TRUE(provider_.Calls().empty()) << "no refused call reached the provider";
  proxy->Unblock("agent");
  EXPECT_TRUE(WaitFor([&] {
    return HttpRequest(port, "POST", "/chat/completions", R"({"model":"m"})").status == 200;
  }));
  EXPECT_EQ(Records(1).size(), 1u) << "refused calls are not metered";
}

class TlsProxyTest : public ::testing::Test {};

TEST_F(TlsProxyTest, HttpsUpstreamIsVerifiedAgainstTheCaFile) {
  TempDir dir;
  if (!testing::MakeSelfSignedCert(dir.path())) {
    GTEST_SKIP() << "openssl CLI unavailable";
  }
  FakeProvider provider(dir.path(), dir / "cert.pem", dir / "key.pem");
  ASSERT_TRUE(provider.ok());
  auto log = std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::atomic<int> known{0};
  auto on_call = [&](std::vector<CallRecord> batch) {
    for (const CallRecord& record : batch) {
      known += record.known ? 1 : 0;
    }
  };
  absl::StatusOr<Upstream> upstream = ParseUpstream("k", provider.url() + "/v1");
  ASSERT_TRUE(upstream.ok());

  // System trust store only: the self-signed certificate is refused → 502.
  auto untrusting = MeteringProxy::Create({}, on_call, log);
  ASSERT_TRUE(untrusting.ok());
  absl::StatusOr<uint16_t> port = (*untrusting)->Open("a", *upstream, 0, false);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(HttpRequest(*port, "POST", "/chat/completions", R"({"model":"m"})").status, 502);

  // With the CA file: verified, forwarded and metered.
  ProxyOptions options;
  options.ca_file = dir / "cert.pem";
  auto trusting = MeteringProxy::Create(options, on_call, log);
  ASSERT_TRUE(trusting.ok());
  port = (*trusting)->Open("a", *upstream, 0, false);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(
      HttpRequest(*port, "POST", "/chat/completions", R"({"model":"m","stream":true})").status,
      200);
  EXPECT_TRUE(WaitFor([&] { return known.load() == 1; }));

  // A large body sent in pieces goes through TLS whole.
  absl::StatusOr<Upstream> root = ParseUpstream("k", provider.url());
  ASSERT_TRUE(root.ok());
  absl::StatusOr<uint16_t> echo = (*trusting)->Open("b", *root, 0, false);
  ASSERT_TRUE(echo.ok());
  const int fd = ConnectWithReadTimeout(*echo);
  ASSERT_GE(fd, 0);
  const std::string body = ResponsesBody(200000);
  ASSERT_TRUE(SendInPieces(fd, "/echo", body, 50000));
  const std::string echoed = ReadUntil(fd, ReplyComplete);
  EXPECT_NE(echoed.find("\"body_sha256\": \"" + Sha256Hex(body) + "\""), std::string::npos)
      << echoed;
  close(fd);

  options.ca_file = dir / "missing.pem";
  EXPECT_FALSE(MeteringProxy::Create(options, on_call, log).ok());
}

}  // namespace
}  // namespace ktesio::daemon::metering
