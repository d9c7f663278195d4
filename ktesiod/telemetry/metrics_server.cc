#include "telemetry/metrics_server.h"

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/local/stream_protocol.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "ktesio/contract/error.h"
#include "telemetry/metrics.h"

// GCC 12 at -O2 may take an Asio coroutine frame's own operator new/delete pair for a mismatch
// (-Wmismatched-new-delete), a false positive explained in metering/proxy/relay.cc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace ktesio::daemon::telemetry {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;

constexpr size_t kMaxHeadBytes = 8192;
constexpr size_t kMaxConnections = 64;
constexpr auto kRequestTimeout = std::chrono::seconds(10);

auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return contract::MakeError(absl::StatusCode::kInvalidArgument, contract::reason::kInvalidArgument,
                             absl::StrCat("metrics address '", text, "': ", why));
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress address;
  if (text.rfind("unix:", 0) == 0) {
    address.kind = ListenAddress::Kind::kUnix;
    address.path = std::string(text.substr(5));
    if (address.path.empty() || address.path.front() != '/') {
      return Invalid(text, "a unix socket path must be absolute (unix:/path)");
    }
    if (address.path.size() >= sizeof(sockaddr_un::sun_path)) {
      return Invalid(text, absl::StrCat("the socket path is over the OS limit of ",
                                        sizeof(sockaddr_un::sun_path) - 1, " bytes"));
    }
    return address;
  }
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 ||
      text.find("://") != absl::string_view::npos || text.find('/') != absl::string_view::npos) {
    return Invalid(text, "expected IP:PORT, [IPv6]:PORT or unix:/path (an address, not a URL)");
  }
  absl::string_view host = text.substr(0, colon);
  absl::string_view port = text.substr(colon + 1);
  uint32_t number = 0;
  if (port.empty() || port.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port, &number) || number > 65535) {
    return Invalid(text, "the port must be a number from 0 to 65535");
  }
  address.port = static_cast<uint16_t>(number);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    return Invalid(text, "an IPv6 address must be in brackets ([::1]:9464)");
  }
  if (host == "localhost") {
    host = "127.0.0.1";
  }
  error_code ec;
  asio::ip::address ip = asio::ip::make_address(std::string(host), ec);
  if (ec) {
    // A host name: resolved once, here (at start), to the first address it has.
    if (host.empty()) {
      return Invalid(text, "expected HOST:PORT, [IPv6]:PORT or unix:/path");
    }
    asio::io_context io;
    tcp::resolver resolver(io);
    const tcp::resolver::results_type found = resolver.resolve(std::string(host), "", ec);
    if (ec || found.empty()) {
      return Invalid(text, absl::StrCat("cannot resolve the host '", host, "' (",
                                        ec ? ec.message() : "no address", ")"));
    }
    ip = found.begin()->endpoint().address();
  }
  address.ip = ip.to_string();
  address.loopback = ip.is_loopback();
  return address;
}

struct MetricsServer::Impl {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
  std::optional<tcp::acceptor> tcp_acceptor;
  std::optional<local::acceptor> unix_acceptor;
  std::string unix_path;
  Handlers handlers;
  std::shared_ptr<spdlog::logger> log;
  size_t connections = 0;  // metrics thread only
  std::thread thread;

  template <typename Acceptor>
  asio::awaitable<void> Accept(Acceptor& acceptor);
  template <typename Socket>
  asio::awaitable<void> Serve(Socket socket);
  http::response<http::string_body> Answer(const http::request<http::empty_body>& request);
};

http::response<http::string_body> MetricsServer::Impl::Answer(
    const http::request<http::empty_body>& request) {
  http::response<http::string_body> response;
  response.version(11);
  response.set(http::field::server, "ktesiod");
  absl::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
  if (get && target == "/metrics") {
    std::optional<std::string> text = handlers.metrics();
    if (text.has_value()) {
      response.result(http::status::ok);
      response.set(http::field::content_type, kPrometheusContentType);
      response.body() = std::move(*text);
    } else {
      response.result(http::status::service_unavailable);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "the engine did not answer in time\n";
    }
  } else if (get && target == "/healthz") {
    const bool healthy = handlers.healthy();
    response.result(healthy ? http::status::ok : http::status::service_unavailable);
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.body() = healthy ? "ok\n" : "the engine does not answer\n";
  } else {
    response.result(http::status::not_found);
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.body() = "not found: this endpoint serves GET /metrics and GET /healthz\n";
  }
  response.prepare_payload();
  if (request.method() == http::verb::head) {
    response.body().clear();  // Content-Length stays that of the GET answer
  }
  return response;
}

template <typename Socket>
asio::awaitable<void> MetricsServer::Impl::Serve(Socket socket) {
  // One deadline per request: a client that dribbles its head, or never reads our answer, is
  // closed when it passes.
  asio::steady_timer deadline(io);
  boost::beast::flat_buffer buffer(kMaxHeadBytes);
  while (true) {
    deadline.expires_after(kRequestTimeout);
    deadline.async_wait([&socket](const error_code& ec) {
      if (!ec) {
        error_code ignored;
        socket.close(ignored);
      }
    });
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kMaxHeadBytes);
    error_code ec;
    co_await http::async_read_header(socket, buffer, parser, Await(ec));
    if (ec) {
      // A head too large gets 431 and a malformed one 400; a closed or timed-out connection
      // just closes. Either way the connection ends.
      const bool too_large = ec == http::error::header_limit;
      const bool malformed =
          ec.category() == http::make_error_code(http::error::bad_target).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message;
      if (too_large || malformed) {
        http::response<http::string_body> refusal;
        refusal.version(11);
        refusal.result(too_large ? http::status::request_header_fields_too_large
                                 : http::status::bad_request);
        refusal.set(http::field::content_type, "text/plain; charset=utf-8");
        refusal.body() = too_large ? "request head over 8 KiB\n" : "malformed request\n";
        refusal.keep_alive(false);
        refusal.prepare_payload();
        error_code ignored;
        co_await http::async_write(socket, refusal, Await(ignored));
      }
      break;
    }
    http::request<http::empty_body> request = parser.release();
    // No body is read: a request that has one ends the connection after the answer.
    const bool has_body = request.has_content_length() ? request[http::field::content_length] != "0"
                                                       : request.chunked();
    http::response<http::string_body> response = Answer(request);
    const bool keep = request.keep_alive() && !has_body;
    response.keep_alive(keep);
    co_await http::async_write(socket, response, Await(ec));
    if (ec || !keep) {
      break;
    }
  }
  deadline.cancel();
  error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_both, ignored);
  socket.close(ignored);
  --connections;
}

template <typename Acceptor>
asio::awaitable<void> MetricsServer::Impl::Accept(Acceptor& acceptor) {
  auto last_warning = std::chrono::steady_clock::time_point();
  uint64_t refused = 0;
  while (acceptor.is_open()) {
    error_code ec;
    typename Acceptor::protocol_type::socket socket = co_await acceptor.async_accept(Await(ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
        co_return;
      }
      // EMFILE and friends: back off instead of spinning, warn at most every 10 s.
      if (std::chrono::steady_clock::now() - last_warning > std::chrono::seconds(10)) {
        log->warn("metrics endpoint: accept failed: {}", ec.message());
        last_warning = std::chrono::steady_clock::now();
      }
      asio::steady_timer pause(io, std::chrono::milliseconds(100));
      co_await pause.async_wait(Await(ec));
      continue;
    }
    if (connections >= kMaxConnections) {
      ++refused;
      if (std::chrono::steady_clock::now() - last_warning > std::chrono::seconds(10)) {
        log->warn("metrics endpoint: {} connections open, {} refused so far", connections, refused);
        last_warning = std::chrono::steady_clock::now();
      }
      continue;  // the socket closes as it goes out of scope
    }
    ++connections;
    asio::co_spawn(io, Serve(std::move(socket)), asio::detached);
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const ListenAddress& address, Handlers handlers, std::shared_ptr<spdlog::logger> log) {
  auto impl = std::make_unique<Impl>();
  impl->handlers = std::move(handlers);
  impl->log = std::move(log);
  error_code ec;
  std::string bound;
  auto unavailable = [&](absl::string_view what) {
    return contract::MakeError(
        absl::StatusCode::kUnavailable, contract::reason::kInternal,
        absl::StrCat("metrics endpoint: cannot listen on ", what, ": ", ec.message()));
  };
  if (address.kind == ListenAddress::Kind::kUnix) {
    struct stat st {};
    if (lstat(address.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        return contract::MakeError(
            absl::StatusCode::kFailedPrecondition, contract::reason::kInvalidArgument,
            absl::StrCat("metrics endpoint: ", address.path, " exists and is not a socket"));
      }
      local::socket probe(impl->io);
      probe.connect(local::endpoint(address.path), ec);
      if (!ec) {
        ec = asio::error::address_in_use;
        return unavailable(address.path);
      }
      unlink(address.path.c_str());  // a stale socket of an earlier daemon
    }
    impl->unix_acceptor.emplace(impl->io);
    local::acceptor& acceptor = *impl->unix_acceptor;
    acceptor.open(local::endpoint().protocol(), ec);
    if (!ec) {
      acceptor.bind(local::endpoint(address.path), ec);
    }
    if (!ec) {
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return unavailable(address.path);
    }
    chmod(address.path.c_str(), 0660);
    impl->unix_path = address.path;
    bound = absl::StrCat("unix:", address.path);
  } else {
    const tcp::endpoint endpoint(asio::ip::make_address(address.ip), address.port);
    impl->tcp_acceptor.emplace(impl->io);
    tcp::acceptor& acceptor = *impl->tcp_acceptor;
    const std::string wanted = endpoint.address().is_v6()
                                   ? absl::StrCat("[", address.ip, "]:", address.port)
                                   : absl::StrCat(address.ip, ":", address.port);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return unavailable(wanted);
    }
    const uint16_t port = acceptor.local_endpoint(ec).port();
    bound = endpoint.address().is_v6() ? absl::StrCat("[", address.ip, "]:", port)
                                       : absl::StrCat(address.ip, ":", port);
  }
  Impl* raw = impl.get();
  if (raw->unix_acceptor.has_value()) {
    asio::co_spawn(raw->io, raw->Accept(*raw->unix_acceptor), asio::detached);
  } else {
    asio::co_spawn(raw->io, raw->Accept(*raw->tcp_acceptor), asio::detached);
  }
  raw->thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "kt-metrics");
    raw->io.run();
  });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl), std::move(bound)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl, std::string bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {}

MetricsServer::~MetricsServer() {
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
  if (!impl_->unix_path.empty()) {
    unlink(impl_->unix_path.c_str());
  }
}

}  // namespace ktesio::daemon::telemetry
