// The kit's loopback provider and POST client (tck/src/loopback_http.h): real sockets on
// 127.0.0.1, no sleeps. Malformed input on either side must be an error, never a throw or crash.

#include "loopback_http.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ktesio/contract/json.h"

namespace ktesio::tck {
namespace {

namespace json = ::ktesio::contract::json;

// Bounds every blocking call below so that a broken peer fails the test instead of hanging it.
void SetTimeouts(int fd) {
  timeval timeout{};
  timeout.tv_sec = 10;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

// Everything `fd` receives until the peer closes (or 10 s pass); stops early once `until` has
// been received when it is not empty.
std::string ReceiveAll(int fd, const std::string& until = "") {
  std::string data;
  char buffer[4096];
  while (until.empty() || data.find(until) == std::string::npos) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      break;
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

// Sends `request` verbatim to 127.0.0.1:`port` and closes the sending side; returns the whole
// answer.
std::string Exchange(uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  SetTimeouts(fd);
  const sockaddr_in addr = Loopback(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    ADD_FAILURE() << "cannot connect to port " << port;
    return "";
  }
  SendAll(fd, request);
  shutdown(fd, SHUT_WR);  // no more requests: the server sees the end of the stream
  std::string answer = ReceiveAll(fd);
  close(fd);
  return answer;
}

// The JSON body of an HTTP answer, or nullopt.
std::optional<json::Value> Body(const std::string& answer) {
  const size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    return std::nullopt;
  }
  return json::Parse(answer.substr(head_end + 4));
}

std::string Post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Accepts one connection on 127.0.0.1, reads the request head, answers `reply` verbatim and
// closes its side, then drains what the client still sends.
class CannedServer {
 public:
  explicit CannedServer(std::string reply) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    EXPECT_EQ(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, reply = std::move(reply)] { Serve(reply); });
  }
  ~CannedServer() {
    thread_.join();
    close(listen_fd_);
  }
  CannedServer(const CannedServer&) = delete;
  CannedServer& operator=(const CannedServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  void Serve(const std::string& reply) {
    pollfd ready{listen_fd_, POLLIN, 0};
    if (poll(&ready, 1, 10000) != 1) {
      return;
    }
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      return;
    }
    SetTimeouts(fd);
    ReceiveAll(fd, "\r\n\r\n");
    SendAll(fd, reply);
    shutdown(fd, SHUT_WR);
    ReceiveAll(fd);
    close(fd);
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

std::unique_ptr<LoopbackProvider> StartProvider() {
  absl::StatusOr<std::unique_ptr<LoopbackProvider>> provider = LoopbackProvider::Start();
  EXPECT_TRUE(provider.ok()) << provider.status();
  if (!provider.ok()) {
    return nullptr;
  }
  EXPECT_NE((*provider)->port(), 0);
  return *std::move(provider);
}

TEST(LoopbackProviderTest, AnswersWithUsageAndRecordsTargets) {
  std::unique_ptr<LoopbackProvider> provider = StartProvider();
  ASSERT_NE(provider, nullptr);
  const std::string answer =
      Exchange(provider->port(), Post("/v1/chat/completions", R"({"model":"tck-usage"})"));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
  std::optional<json::Value> body = Body(answer);
  ASSERT_TRUE(body.has_value()) << answer;
  const json::Value* prompt = body->At({"usage", "prompt_tokens"});
  const json::Value* completion = body->At({"usage", "completion_tokens"});
  ASSERT_NE(prompt, nullptr) << answer;
  ASSERT_NE(completion, nullptr) << answer;
  EXPECT_EQ(prompt->AsUint(), LoopbackProvider::kInputTokens);
  EXPECT_EQ(completion->AsUint(), LoopbackProvider::kOutputTokens);
  EXPECT_EQ(provider->Targets(), std::vector<std::string>{"/v1/chat/completions"});
}

TEST(LoopbackProviderTest, NoUsageForTheNoUsageModel) {
  std::unique_ptr<LoopbackProvider> provider = StartProvider();
  ASSERT_NE(provider, nullptr);
  const std::string answer = Exchange(
      provider->port(), Post("/v1/chat/completions", R"({"stream":false,"model":"tck-no-usage"})"));
  std::optional<json::Value> body = Body(answer);
  ASSERT_TRUE(body.has_value()) << answer;
  EXPECT_EQ(body->Find("usage"), nullptr) << answer;
  // Only the model decides: the name elsewhere in the body does not.
  const std::string other = Exchange(
      provider->port(), Post("/v1/chat/completions", R"({"model":"m","user":"tck-no-usage"})"));
  body = Body(other);
  ASSERT_TRUE(body.has_value()) << other;
  EXPECT_NE(body->Find("usage"), nullptr) << other;
}

TEST(LoopbackProviderTest, ReadsAChunkedBody) {
  std::unique_ptr<LoopbackProvider> provider = StartProvider();
  ASSERT_NE(provider, nullptr);
  const std::string answer =
      Exchange(provider->port(),
               "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "d\r\n{\"model\":\"tck\r\nb\r\n-no-usage\"}\r\n0\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  std::optional<json::Value> body = Body(answer);
  ASSERT_TRUE(body.has_value()) << answer;
  EXPECT_EQ(body->Find("usage"), nullptr) << answer;
}

TEST(LoopbackProviderTest, MalformedRequestsGet400AndAreNotRecorded) {
  std::unique_ptr<LoopbackProvider> provider = StartProvider();
  ASSERT_NE(provider, nullptr);
  for (const std::string& request : {
           std::string("NOT HTTP AT ALL\r\n\r\n"),
           std::string("POST /v1 HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
           std::string("POST /v1 HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
           std::string("POST /v1 HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n"),
           std::string("POST /v1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
       }) {
    const std::string answer = Exchange(provider->port(), request);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << request << "\n" << answer;
  }
  // A client that connects and leaves is not answered; the provider keeps serving.
  EXPECT_EQ(Exchange(provider->port(), ""), "");
  EXPECT_TRUE(provider->Targets().empty());
  absl::StatusOr<int> status = LoopbackPost(
      "http://127.0.0.1:" + std::to_string(provider->port()) + "/v1/x", R"({"model":"m"})");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(provider->Targets(), std::vector<std::string>{"/v1/x"});
}

TEST(LoopbackPostTest, ReturnsTheStatusOfTheAnswer) {
  CannedServer server("HTTP/1.1 418 I'm a teapot\r\nContent-Length: 2\r\n\r\n{}");
  absl::StatusOr<int> status =
      LoopbackPost("http://127.0.0.1:" + std::to_string(server.port()) + "/a", "{}");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 418);
}

TEST(LoopbackPostTest, ABodyDelimitedByCloseIsRead) {
  CannedServer server("HTTP/1.1 503 Unavailable\r\nConnection: close\r\n\r\nlater");
  absl::StatusOr<int> status =
      LoopbackPost("http://127.0.0.1:" + std::to_string(server.port()), "{}");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 503);
}

TEST(LoopbackPostTest, MalformedAnswersAreErrors) {
  for (const std::string& reply : {
           std::string(""),
           std::string("garbage\r\n\r\n"),
           std::string("HTTP/1."),
           std::string("HTTP/1.1 abc OK\r\n\r\n"),
           std::string("HTTP/1.1 99999 Big\r\n\r\n"),
           std::string("HTTP/1.1 2"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"),
       }) {
    CannedServer server(reply);
    const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1";
    absl::StatusOr<int> status = LoopbackPost(url, "{}");
    ASSERT_FALSE(status.ok()) << "reply: " << reply;
    EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable) << reply;
    EXPECT_EQ(status.status().message(), "no HTTP response from " + url) << reply;
  }
}

TEST(LoopbackPostTest, RejectsUrlsThatAreNotLoopbackHttp) {
  for (const std::string url :
       {"", "https://127.0.0.1:80/", "http://localhost:80/", "http://127.0.0.1/",
        "http://127.0.0.1:/v1", "http://127.0.0.1:0/", "http://127.0.0.1:65536/",
        "http://127.0.0.1:8o/", "http://127.0.0.1:-1/", "http://127.0.0.1:99999999999999999999/"}) {
    absl::StatusOr<int> status = LoopbackPost(url, "{}");
    ASSERT_FALSE(status.ok()) << url;
    EXPECT_EQ(status.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_EQ(status.status().message(), "not a loopback http URL: " + url);
  }
}

TEST(LoopbackPostTest, ARefusedConnectionIsUnavailable) {
  uint16_t port = 0;
  {
    std::unique_ptr<LoopbackProvider> provider = StartProvider();
    ASSERT_NE(provider, nullptr);
    port = provider->port();
  }  // closed: nothing listens there any more
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  absl::StatusOr<int> status = LoopbackPost(url, "{}");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.status().message().rfind("connect to " + url + ": ", 0), 0u) << status.status();
}

}  // namespace
}  // namespace ktesio::tck
