#include "loopback_http.h"

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <fcntl.h>

#include <chrono>
#include <optional>
#include <thread>

#include "absl/memory/memory.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http.hpp"
#include "ktesio/contract/json.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::tck {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = ::ktesio::contract::json;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// Every read or write of one exchange, on either side, ends after this.
constexpr auto kIoTimeout = std::chrono::seconds(10);
constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 20;

auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// Asio opens sockets without FD_CLOEXEC; the kit's sockets must not leak into programs it starts.
void CloseOnExec(int fd) {
  if (fd >= 0) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
}

// True for an error of Beast's HTTP parser about the bytes received (the peer sent something
// that is not HTTP, or too much of it), false for a closed or timed-out connection.
bool IsMalformed(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

// The chat completion answering `request_body`: with usage, unless its "model" is "tck-no-usage".
std::string CompletionFor(const std::string& request_body) {
  const std::optional<json::Value> request = json::Parse(request_body);
  const json::Value* model = request.has_value() ? request->Find("model") : nullptr;
  if (model != nullptr && model->kind == json::Kind::kString && model->text == "tck-no-usage") {
    return R"({"id":"tck","object":"chat.completion","choices":[]})";
  }
  return absl::StrCat(
      R"({"id":"tck","object":"chat.completion","choices":[],"usage":{"prompt_tokens":)",
      LoopbackProvider::kInputTokens, R"(,"completion_tokens":)", LoopbackProvider::kOutputTokens,
      "}}");
}

struct LoopbackUrl {
  uint16_t port = 0;
  std::string target;  // "/" when the URL has no path
};

// "http://127.0.0.1:PORT[/path]" with PORT in 1..65535. INVALID_ARGUMENT otherwise.
absl::StatusOr<LoopbackUrl> ParseLoopbackUrl(const std::string& url) {
  const absl::Status invalid = absl::InvalidArgumentError("not a loopback http URL: " + url);
  absl::string_view rest(url);
  if (!absl::ConsumePrefix(&rest, "http://127.0.0.1:")) {
    return invalid;
  }
  const size_t slash = rest.find('/');
  const absl::string_view port_text = rest.substr(0, slash);
  uint32_t port = 0;
  if (port_text.empty() || port_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
    return invalid;
  }
  LoopbackUrl out;
  out.port = static_cast<uint16_t>(port);
  out.target = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  return out;
}

// One POST over a fresh connection; the status of the answer.
asio::awaitable<absl::StatusOr<int>> Post(LoopbackUrl where, std::string url, std::string body) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  error_code ec;
  stream.socket().open(tcp::v4(), ec);
  CloseOnExec(stream.socket().native_handle());
  stream.expires_after(kIoTimeout);
  if (!ec) {
    co_await stream.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), where.port),
                                  Await(ec));
  }
  if (ec) {
    co_return absl::UnavailableError(absl::StrCat("connect to ", url, ": ", ec.message()));
  }
  http::request<http::string_body> request(http::verb::post, where.target, 11);
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.keep_alive(false);
  request.body() = std::move(body);
  request.prepare_payload();
  // A failed write is not final: the server may have answered (and closed) before reading it all.
  co_await http::async_write(stream, request, Await(ec));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBodyBytes);
  co_await http::async_read(stream, buffer, parser, Await(ec));
  if (ec) {
    co_return absl::UnavailableError("no HTTP response from " + url);
  }
  co_return static_cast<int>(parser.get().result_int());
}

}  // namespace

struct LoopbackProvider::Server {
  explicit Server(LoopbackProvider& provider) : owner(provider) {}

  asio::awaitable<void> Accept();
  asio::awaitable<void> Answer(tcp::socket socket);

  LoopbackProvider& owner;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
};

asio::awaitable<void> LoopbackProvider::Server::Accept() {
  while (acceptor.is_open()) {
    error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(Await(ec));
    if (ec == asio::error::operation_aborted) {
      co_return;
    }
    if (ec) {
      // EMFILE and friends: back off instead of spinning.
      asio::steady_timer pause(io, std::chrono::milliseconds(100));
      co_await pause.async_wait(Await(ec));
      continue;
    }
    CloseOnExec(socket.native_handle());
    asio::co_spawn(io, Answer(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> LoopbackProvider::Server::Answer(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  stream.expires_after(kIoTimeout);
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  parser.body_limit(kMaxBodyBytes);
  error_code ec;
  co_await http::async_read(stream, buffer, parser, Await(ec));
  if (ec && !IsMalformed(ec)) {
    co_return;  // closed or timed out: nobody to answer
  }
  http::response<http::string_body> response;
  response.version(11);
  response.keep_alive(false);
  response.set(http::field::content_type, "application/json");
  if (ec) {
    response.result(http::status::bad_request);
    response.body() = R"({"error":{"message":"malformed request"}})";
  } else {
    const http::request<http::string_body>& request = parser.get();
    owner.Record(std::string(request.target()));
    response.result(http::status::ok);
    response.body() = CompletionFor(request.body());
  }
  response.prepare_payload();
  co_await http::async_write(stream, response, Await(ec));
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
}

LoopbackProvider::LoopbackProvider() = default;

absl::StatusOr<std::unique_ptr<LoopbackProvider>> LoopbackProvider::Start() {
  auto provider = absl::WrapUnique(new LoopbackProvider());
  provider->server_ = std::make_unique<Server>(*provider);
  Server& server = *provider->server_;
  const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
  error_code ec;
  server.acceptor.open(loopback.protocol(), ec);
  CloseOnExec(server.acceptor.native_handle());
  if (!ec) {
    server.acceptor.bind(loopback, ec);
  }
  if (!ec) {
    server.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  tcp::endpoint bound;
  if (!ec) {
    bound = server.acceptor.local_endpoint(ec);
  }
  if (ec) {
    return absl::UnavailableError("cannot listen on 127.0.0.1: " + ec.message());
  }
  provider->port_ = bound.port();
  asio::co_spawn(server.io, server.Accept(), asio::detached);
  server.thread = std::thread([&server] { server.io.run(); });
  return provider;
}

LoopbackProvider::~LoopbackProvider() {
  if (server_ != nullptr) {
    server_->io.stop();
    if (server_->thread.joinable()) {
      server_->thread.join();
    }
  }
}

std::vector<std::string> LoopbackProvider::Targets() const {
  absl::MutexLock lock(&mu_);
  return targets_;
}

void LoopbackProvider::Record(std::string target) {
  absl::MutexLock lock(&mu_);
  targets_.push_back(std::move(target));
}

absl::StatusOr<int> LoopbackPost(const std::string& url, const std::string& body) {
  KT_ASSIGN_OR_RETURN(LoopbackUrl where, ParseLoopbackUrl(url));
  asio::io_context io;
  absl::StatusOr<int> result = absl::UnavailableError("no HTTP response from " + url);
  // Post() reports every failure in its result; an exception (only bad_alloc can escape it)
  // leaves the preset error.
  asio::co_spawn(io, Post(std::move(where), url, body),
                 [&result](std::exception_ptr error, absl::StatusOr<int> status) {
                   if (error == nullptr) {
                     result = std::move(status);
                   }
                 });
  io.run();
  return result;
}

}  // namespace ktesio::tck
