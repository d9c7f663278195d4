#include "metering/proxy/proxy.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "metering/proxy/http_message.h"

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <openssl/ssl.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "ktesio/contract/error.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::daemon::metering {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kHeaderLimit = 64u << 10;
constexpr size_t kRelayBuffer = 64u << 10;

auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// Re-arms a stream's idle deadline at most once a second: each arming is a timer operation,
// and a stream relays many pieces a second. The deadline thus lies between idle - 1 s and idle
// after the last activity.
class IdleDeadline {
 public:
  void Touch(beast::tcp_stream& stream, std::chrono::milliseconds idle) {
    const auto now = std::chrono::steady_clock::now();
    if (now - armed_ >= std::chrono::seconds(1)) {
      stream.expires_after(idle);
      armed_ = now;
    }
  }
  void Reset() { armed_ = {}; }

 private:
  std::chrono::steady_clock::time_point armed_{};
};

// One upstream connection, plain or TLS.
struct UpstreamConn {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  IdleDeadline idle;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  bool open() { return (plain || tls) && lowest().socket().is_open(); }
  void Reset() {
    if (plain || tls) {
      error_code ignored;
      lowest().socket().close(ignored);
    }
    plain.reset();
    tls.reset();
    buffer.clear();
    idle.Reset();
  }
};

struct ConnState {
  explicit ConnState(tcp::socket socket) : client(std::move(socket)) {}
  beast::tcp_stream client;
  IdleDeadline client_idle;
  UpstreamConn up;
  std::vector<char> relay_buffer;  // response body pieces, reused across requests
};

// Writes a response to the agent: whatever is pending (the head, until it has gone out), each
// piece of the body framed for the agent (chunked or as is) and — when `last` — the terminating
// chunk, one gathered write per piece. `on_first_write` runs before the first write (the
// proxy's added latency ends there).
class ClientWriter {
 public:
  ClientWriter(ConnState& conn, std::string head, bool chunked, std::chrono::milliseconds idle,
               std::function<void()> on_first_write)
      : conn_(conn),
        pending_(std::move(head)),
        chunked_(chunked),
        idle_(idle),
        on_first_write_(std::move(on_first_write)) {}

  // False when the agent is gone.
  asio::awaitable<bool> Write(std::string_view data, bool last) {
    char size_line[24];
    pieces_.clear();
    if (!pending_.empty()) {
      pieces_.push_back(asio::buffer(pending_));
    }
    if (!data.empty()) {
      if (chunked_) {
        const int n = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
        pieces_.push_back(asio::buffer(size_line, static_cast<size_t>(n)));
      }
      pieces_.push_back(asio::buffer(data.data(), data.size()));
      if (chunked_) {
        pieces_.push_back(asio::buffer("\r\n", 2));
      }
    }
    if (last && chunked_) {
      pieces_.push_back(asio::buffer("0\r\n\r\n", 5));
    }
    if (pieces_.empty()) {
      co_return true;
    }
    if (on_first_write_) {
      std::exchange(on_first_write_, nullptr)();
    }
    error_code ec;
    conn_.client_idle.Touch(conn_.client, idle_);
    co_await asio::async_write(conn_.client, pieces_, Await(ec));
    pending_.clear();
    co_return !ec;
  }

 private:
  ConnState& conn_;
  std::string pending_;
  const bool chunked_;
  const std::chrono::milliseconds idle_;
  std::function<void()> on_first_write_;
  std::vector<asio::const_buffer> pieces_;
};

// How one request/response exchange ended.
enum class Exchange {
  kDone,        // response relayed completely
  kRetry,       // a reused connection failed before any response byte: retry on a fresh one
  kBadGateway,  // the upstream failed before the response head: answer 502
  kCutOff,      // the response was cut off after it began: close the client connection
  kClientGone,  // the client went away mid-response
};

}  // namespace

struct MeteringProxy::Impl {
  struct Listener {
    explicit Listener(asio::io_context& io) : acceptor(io) {}
    std::string instance;
    tcp::acceptor acceptor;
    std::shared_ptr<const Upstream> upstream;  // proxy thread only after Open
    std::string path_prefix;                   // set before the first accept
    size_t open = 0;                           // admitted connections (Admission)
    std::vector<std::weak_ptr<ConnState>> connections;
    bool closed = false;
    bool blocked = false;  // budget breach: model calls refused
  };

  ProxyOptions options;
  OnCall on_call;
  std::vector<CallRecord> batch;  // proxy thread only
  bool batch_armed = false;
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<Admission> admission;  // before io: outlives the coroutines io destroys
  asio::io_context io{1};
  // Built on first use (TlsContext): loading the system trust store parses every certificate in
  // it, about 3 MiB of heap and libcrypto pages a daemon without TLS upstreams never needs.
  std::optional<ssl::context> tls;  // proxy thread only, once the proxy thread runs
  asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
  asio::steady_timer batch_timer{io};
  std::thread thread;
  mutable absl::Mutex mu;
  std::map<std::string, std::shared_ptr<Listener>> listeners ABSL_GUARDED_BY(mu);
  std::map<std::string, ProxyInstanceStats> stats ABSL_GUARDED_BY(mu);

  absl::Status BuildTls() {
    error_code ec;
    ssl::context& context = tls.emplace(ssl::context::tls_client);
    context.set_default_verify_paths(ec);
    if (ec) {
      log->warn("metering proxy: the system trust store could not be loaded ({})", ec.message());
    }
    if (!options.ca_file.empty()) {
      context.load_verify_file(options.ca_file, ec);
      if (ec) {
        tls.reset();
        return contract::MakeError(absl::StatusCode::kInvalidArgument,
                                   contract::reason::kConfigInvalid,
                                   absl::StrCat("metering CA file '", options.ca_file,
                                                "' could not be loaded: ", ec.message()));
      }
    }
    context.set_verify_mode(ssl::verify_peer);
    return absl::OkStatus();
  }
  // The TLS client context, built on the first TLS upstream (or at Create with a CA file).
  ssl::context& TlsContext() {
    if (!tls) {
      // The CA file loaded at Create; the system store cannot fail (a warning at worst).
      (void)BuildTls();
    }
    return *tls;
  }

  void CountError(const std::string& instance, const char* reason) {
    absl::MutexLock lock(&mu);
    stats[instance].upstream_errors[reason] += 1;
  }
  void ObserveAdded(const std::string& instance, std::chrono::steady_clock::duration added) {
    absl::MutexLock lock(&mu);
    stats[instance].added_before_first_byte.Observe(std::chrono::duration<double>(added).count());
  }

  asio::awaitable<void> Accept(std::shared_ptr<Listener> listener);
  asio::awaitable<void> Serve(std::shared_ptr<Listener> listener, std::shared_ptr<ConnState> conn);
  // Reads the agent's next request; nullopt when the connection is over (the agent left, or a
  // malformed or oversized request got its 400/413/431 reply).
  asio::awaitable<std::optional<http::request<http::string_body>>> ReadRequest(
      ConnState& conn, beast::flat_buffer& buffer);
  // Sends `out` upstream (once more on a fresh connection when a reused one turned out dead)
  // and relays the response.
  asio::awaitable<Exchange> Forward(Listener& listener, ConnState& conn,
                                    http::request<http::string_body>& out, const RequestPlan& plan,
                                    bool head_request, int client_version, bool& keep_alive,
                                    std::chrono::steady_clock::time_point request_read);
  asio::awaitable<bool> Connect(const Upstream& upstream, UpstreamConn& up,
                                const std::string& instance);
  template <class Stream>
  asio::awaitable<Exchange> Relay(Stream& upstream_stream, UpstreamConn& up, ConnState& conn,
                                  http::request<http::string_body>& out, bool reused,
                                  const RequestPlan& plan, bool head_request, int client_version,
                                  bool& keep_alive, const std::string& instance,
                                  std::chrono::steady_clock::duration added_before);
  void Report(const std::string& instance, const RequestPlan& plan, const ResponseMeter& meter,
              unsigned status);
  void CloseListener(Listener& listener);
  // Logs the admission summary when one is due (at most one line per interval).
  void ReportPressure(const std::string& error) {
    if (std::string line = admission->DueReport(error); !line.empty()) {
      log->warn("metering proxy: {}", line);
    }
  }
};

absl::StatusOr<std::unique_ptr<MeteringProxy>> MeteringProxy::Create(
    ProxyOptions options, OnCall on_call, std::shared_ptr<spdlog::logger> log) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->on_call = std::move(on_call);
  impl->log = std::move(log);
  impl->admission = std::make_unique<Admission>(impl->options.admission);
  if (!impl->options.ca_file.empty()) {
    // A configured CA file is checked now, so that a bad one fails the daemon's start.
    KT_RETURN_IF_ERROR(impl->BuildTls());
  }
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "kt-proxy");
    raw->io.run();
  });
  return std::unique_ptr<MeteringProxy>(new MeteringProxy(std::move(impl)));
}

MeteringProxy::MeteringProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MeteringProxy::~MeteringProxy() {
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
  absl::MutexLock lock(&impl_->mu);
  impl_->listeners.clear();
}

absl::StatusOr<uint16_t> MeteringProxy::Open(const std::string& instance, const Upstream& upstream,
                                             uint16_t port, bool exact, std::string path_prefix) {
  auto shared_upstream = std::make_shared<const Upstream>(upstream);
  absl::MutexLock lock(&impl_->mu);
  if (auto it = impl_->listeners.find(instance); it != impl_->listeners.end()) {
    std::shared_ptr<Impl::Listener> listener = it->second;
    asio::post(impl_->io, [listener, shared_upstream] { listener->upstream = shared_upstream; });
    return listener->acceptor.local_endpoint().port();
  }
  auto listener = std::make_shared<Impl::Listener>(impl_->io);
  listener->instance = instance;
  listener->path_prefix = std::move(path_prefix);
  listener->upstream = shared_upstream;
  auto bind = [&](uint16_t at) -> error_code {
    error_code ec;
    listener->acceptor = tcp::acceptor(impl_->io);
    listener->acceptor.open(tcp::v4(), ec);
    if (!ec) {
      listener->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    }
    if (!ec) {
      listener->acceptor.bind(tcp::endpoint(asio::ip::address_v4::loopback(), at), ec);
    }
    if (!ec) {
      listener->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    return ec;
  };
  error_code ec = bind(port);
  if (ec && port != 0 && !exact) {
    impl_->log->warn("metering proxy for '{}': port {} unavailable ({}); using a new port",
                     instance, port, ec.message());
    ec = bind(0);
  }
  if (ec) {
    return contract::MakeError(
        absl::StatusCode::kFailedPrecondition, contract::reason::kLaunchFailed,
        absl::StrCat("the metering proxy for '", instance, "' could not listen on 127.0.0.1:", port,
                     ": ", ec.message()));
  }
  const uint16_t bound = listener->acceptor.local_endpoint().port();
  impl_->listeners[instance] = listener;
  Impl* impl = impl_.get();
  asio::co_spawn(impl_->io, impl->Accept(listener), asio::detached);
  impl_->log->info("metering proxy listening instance={} port={} upstream_tls={}", instance, bound,
                   upstream.tls);
  return bound;
}

void MeteringProxy::Close(const std::string& instance) {
  std::shared_ptr<Impl::Listener> listener;
  {
    absl::MutexLock lock(&impl_->mu);
    auto it = impl_->listeners.find(instance);
    if (it == impl_->listeners.end()) {
      return;
    }
    listener = std::move(it->second);
    impl_->listeners.erase(it);
  }
  Impl* impl = impl_.get();
  asio::post(impl_->io, [impl, listener] { impl->CloseListener(*listener); });
  impl_->log->info("metering proxy closed instance={}", instance);
}

void MeteringProxy::Block(const std::string& instance) {
  absl::MutexLock lock(&impl_->mu);
  if (auto it = impl_->listeners.find(instance); it != impl_->listeners.end()) {
    asio::post(impl_->io, [listener = it->second] { listener->blocked = true; });
    impl_->log->warn("metering proxy: model calls refused after a budget breach instance={}",
                     instance);
  }
}

void MeteringProxy::Unblock(const std::string& instance) {
  absl::MutexLock lock(&impl_->mu);
  if (auto it = impl_->listeners.find(instance); it != impl_->listeners.end()) {
    asio::post(impl_->io, [listener = it->second] { listener->blocked = false; });
  }
}

uint16_t MeteringProxy::Port(const std::string& instance) const {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->listeners.find(instance);
  if (it == impl_->listeners.end()) {
    return 0;
  }
  error_code ec;
  const tcp::endpoint endpoint = it->second->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

std::string MeteringProxy::PathPrefix(const std::string& instance) const {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->listeners.find(instance);
  return it == impl_->listeners.end() ? std::string() : it->second->path_prefix;
}

Admission::Pressure MeteringProxy::Pressure() const { return impl_->admission->Snapshot(); }

std::map<std::string, ProxyInstanceStats> MeteringProxy::Stats() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

void MeteringProxy::Forget(const std::string& instance) {
  absl::MutexLock lock(&impl_->mu);
  impl_->stats.erase(instance);
}

void MeteringProxy::Impl::CloseListener(Listener& listener) {
  listener.closed = true;
  error_code ignored;
  listener.acceptor.close(ignored);
  for (const std::weak_ptr<ConnState>& weak : listener.connections) {
    if (std::shared_ptr<ConnState> conn = weak.lock()) {
      conn->client.socket().close(ignored);
      conn->up.Reset();
    }
  }
  listener.connections.clear();
}

asio::awaitable<void> MeteringProxy::Impl::Accept(std::shared_ptr<Listener> listener) {
  asio::steady_timer backoff(io);
  while (!listener->closed) {
    error_code ec;
    tcp::socket socket = co_await listener->acceptor.async_accept(Await(ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || listener->closed) {
        co_return;
      }
      const bool starved = ec == asio::error::no_descriptors || ec.value() == ENFILE ||
                           ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
      if (!starved) {
        log->warn("metering proxy accept failed instance={} error={}", listener->instance,
                  ec.message());
        continue;
      }
      // Out of descriptors or memory: keep serving the connections we have, wait, retry.
      backoff.expires_after(admission->OnResourceError());
      ReportPressure(ec.message());
      co_await backoff.async_wait(Await(ec));
      continue;
    }
    admission->OnAccepted();
    if (!admission->TryAdmit(&listener->open)) {
      socket.close(ec);  // over a cap: closed at once, costs no descriptor for long
      ReportPressure("");
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto conn = std::make_shared<ConnState>(std::move(socket));
    std::erase_if(listener->connections, [](const auto& weak) { return weak.expired(); });
    listener->connections.push_back(conn);
    asio::co_spawn(io, Serve(listener, conn), asio::detached);
  }
}

asio::awaitable<bool> MeteringProxy::Impl::Connect(const Upstream& upstream, UpstreamConn& up,
                                                   const std::string& instance) {
  up.Reset();
  error_code ec;
  tcp::resolver resolver(io);
  auto results = co_await resolver.async_resolve(upstream.host, upstream.port, Await(ec));
  if (ec) {
    log->warn("metering proxy: upstream name resolution failed ({})", ec.message());
    CountError(instance, "resolve");
    co_return false;
  }
  if (upstream.tls) {
    up.tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, TlsContext());
  } else {
    up.plain = std::make_unique<beast::tcp_stream>(io);
  }
  up.lowest().expires_after(options.connect_timeout);
  co_await up.lowest().async_connect(results, Await(ec));
  if (ec) {
    log->warn("metering proxy: upstream connect failed ({})", ec.message());
    CountError(instance, "connect");
    up.Reset();
    co_return false;
  }
  up.lowest().socket().set_option(tcp::no_delay(true), ec);
  if (up.tls) {
    // SNI, and the certificate must name the host (verified against the system store + CA file).
    if (!SSL_set_tlsext_host_name(up.tls->native_handle(), upstream.host.c_str())) {
      log->warn("metering proxy: could not set TLS server name");
      CountError(instance, "tls");
      up.Reset();
      co_return false;
    }
    up.tls->set_verify_callback(ssl::host_name_verification(upstream.host));
    co_await up.tls->async_handshake(ssl::stream_base::client, Await(ec));
    if (ec) {
      log->warn("metering proxy: upstream TLS handshake failed ({})", ec.message());
      CountError(instance, "tls");
      up.Reset();
      co_return false;
    }
  }
  up.lowest().expires_never();
  up.idle.Reset();
  co_return true;
}

void MeteringProxy::Impl::Report(const std::string& instance, const RequestPlan& plan,
                                 const ResponseMeter& meter, unsigned status) {
  const ResponseMeter::Outcome outcome = meter.outcome();
  if (outcome == ResponseMeter::Outcome::kNotMetered) {
    return;
  }
  CallRecord record;
  record.instance = instance;
  record.shape = plan.shape;
  record.known = outcome == ResponseMeter::Outcome::kKnown;
  record.usage = meter.usage();
  record.status = status;
  // Hand records over in small batches: a cross-thread wakeup per call would cost the calls
  // themselves latency. The batch window bounds how late a budget sees the usage.
  batch.push_back(std::move(record));
  if (!batch_armed) {
    batch_armed = true;
    batch_timer.expires_after(options.report_window);
    batch_timer.async_wait([this](const error_code&) {
      batch_armed = false;
      std::vector<CallRecord> ready;
      ready.swap(batch);
      for (CallRecord& call : ready) {
        on_call(std::move(call));
      }
    });
  }
}

template <class Stream>
asio::awaitable<Exchange> MeteringProxy::Impl::Relay(
    Stream& upstream_stream, UpstreamConn& up, ConnState& conn,
    http::request<http::string_body>& out, bool reused, const RequestPlan& plan, bool head_request,
    int client_version, bool& keep_alive, const std::string& instance,
    std::chrono::steady_clock::duration added_before) {
  error_code ec;
  up.idle.Touch(up.lowest(), options.idle_timeout);
  co_await http::async_write(upstream_stream, out, Await(ec));
  if (ec) {
    log->debug("metering proxy: upstream write failed reused={} ({})", reused, ec.message());
    if (!reused) {
      CountError(instance, "write");
    }
    co_return reused ? Exchange::kRetry : Exchange::kBadGateway;
  }
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // responses: unbounded
  if (head_request) {
    parser.skip(true);
  }
  co_await http::async_read_header(upstream_stream, up.buffer, parser, Await(ec));
  if (ec) {
    log->warn("metering proxy: reading the upstream response head failed ({})", ec.message());
    const bool retry = reused && up.buffer.size() == 0;
    if (!retry) {
      CountError(instance, "response_head");
    }
    co_return retry ? Exchange::kRetry : Exchange::kBadGateway;
  }
  // The proxy's own time before the first byte: what it spent before the upstream write, plus
  // from the latest arrival from the provider to the first write to the agent.
  auto arrived = std::chrono::steady_clock::now();
  auto& response = parser.get();
  const unsigned status = response.result_int();
  ResponseMeter meter(plan.shape, plan.injected, out.method() == http::verb::post);
  meter.Begin(status, std::string_view(response[http::field::content_type].data(),
                                       response[http::field::content_type].size()));
  const bool no_body = head_request || status / 100 == 1 || status == 204 || status == 304;
  // Framing towards the client: pass a Content-Length through when nothing is stripped;
  // otherwise chunked (HTTP/1.1) or close-delimited (HTTP/1.0).
  const bool pass_length = !no_body && parser.content_length().has_value() && !plan.injected;
  const bool chunked = !no_body && !pass_length && client_version >= 11;
  if (!no_body && !pass_length && !chunked) {
    keep_alive = false;
  }
  ResponseFraming framing = ResponseFraming::kCloseDelimited;
  if (no_body) {
    framing = ResponseFraming::kNoBody;
  } else if (pass_length) {
    framing = ResponseFraming::kContentLength;
  } else if (chunked) {
    framing = ResponseFraming::kChunked;
  }
  std::string head =
      ResponseHead(response.base(), framing, parser.content_length().value_or(0), keep_alive);
  ClientWriter writer(conn, std::move(head), chunked, options.idle_timeout, [&] {
    ObserveAdded(instance, added_before + (std::chrono::steady_clock::now() - arrived));
  });
  std::vector<char>& buffer = conn.relay_buffer;
  buffer.resize(kRelayBuffer);
  std::string forward;
  bool done = parser.is_done();
  if (done) {
    meter.Finish(true, forward);
  }
  // A stream's head goes out at once (the agent is waiting for its first token); a plain body's
  // head goes out with the body's first bytes.
  // (When the first event already arrived with the head, both go out in one write below.)
  if (((meter.streaming() && up.buffer.size() == 0) || done) &&
      !co_await writer.Write(forward, done)) {
    co_return Exchange::kClientGone;
  }
  forward.clear();
  bool cut = false;
  while (!done) {
    // Parse what is already buffered, without I/O (Beast yields one chunk per step), so the
    // client gets one write per arrival from the provider, not one per chunk.
    while (!parser.is_done() && up.buffer.size() > 0) {
      response.body().data = buffer.data();
      response.body().size = buffer.size();
      const size_t used = parser.put(up.buffer.data(), ec);
      up.buffer.consume(used);
      if (ec == http::error::need_buffer) {
        ec = {};
      }
      const size_t got = buffer.size() - response.body().size;
      meter.Feed(std::string_view(buffer.data(), got), forward);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec || (used == 0 && got == 0)) {
        break;
      }
    }
    if (!ec) {
      done = parser.is_done();
      if (done) {
        meter.Finish(true, forward);
      }
      if ((!forward.empty() || done) && !co_await writer.Write(forward, done)) {
        if (!done) {
          meter.Finish(false, forward);
        }
        Report(instance, plan, meter, status);
        co_return Exchange::kClientGone;
      }
      forward.clear();
      if (done) {
        break;
      }
      // Wait for the provider's next piece.
      response.body().data = buffer.data();
      response.body().size = buffer.size();
      up.idle.Touch(up.lowest(), options.idle_timeout);
      co_await http::async_read_some(upstream_stream, up.buffer, parser, Await(ec));
      arrived = std::chrono::steady_clock::now();
      if (ec == http::error::need_buffer) {
        ec = {};
      }
      meter.Feed(std::string_view(buffer.data(), buffer.size() - response.body().size), forward);
      done = !ec && parser.is_done();
      if (done) {
        meter.Finish(true, forward);
        if (!co_await writer.Write(forward, true)) {
          Report(instance, plan, meter, status);
          co_return Exchange::kClientGone;
        }
        break;
      }
    }
    if (ec) {
      cut = true;
      CountError(instance, "cut");
      meter.Finish(false, forward);
      co_await writer.Write(forward, false);  // relay what came; no terminating chunk
      break;
    }
  }
  Report(instance, plan, meter, status);  // after the last byte went out
  if (cut) {
    co_return Exchange::kCutOff;
  }
  if (!WantsKeepAlive(response.base())) {
    up.Reset();
  }
  co_return Exchange::kDone;
}

asio::awaitable<std::optional<http::request<http::string_body>>> MeteringProxy::Impl::ReadRequest(
    ConnState& conn, beast::flat_buffer& buffer) {
  error_code ec;
  http::request_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(options.max_request_bytes);
  // A head must arrive within header_timeout: a client that opens and idles, or trickles its
  // head, gives its descriptor back soon (the body may then take idle_timeout per silence).
  conn.client.expires_after(options.header_timeout);
  conn.client_idle.Reset();
  co_await http::async_read_header(conn.client, buffer, parser, Await(ec));
  conn.client_idle.Touch(conn.client, options.idle_timeout);
  if (ec == http::error::body_limit) {  // a declared Content-Length over the cap
    const std::string reply = FixedResponse(413, "Payload Too Large", kTooLargeBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  if (ec) {
    if (ec == http::error::header_limit) {
      const std::string reply = FixedResponse(431, "Request Header Fields Too Large", "", false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
               ec != asio::error::operation_aborted && ec != beast::error::timeout &&
               ec != asio::error::connection_reset) {
      const std::string reply = FixedResponse(400, "Bad Request", "", false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    }
    co_return std::nullopt;
  }
  const auto& head = parser.get();
  if (beast::iequals(head[http::field::expect], "100-continue")) {
    co_await asio::async_write(conn.client, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25),
                               Await(ec));
  }
  co_await http::async_read(conn.client, buffer, parser, Await(ec));
  if (ec == http::error::body_limit) {
    const std::string reply = FixedResponse(413, "Payload Too Large", kTooLargeBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  if (ec) {
    if (ec != asio::error::eof && ec != http::error::end_of_stream &&
        ec != asio::error::operation_aborted) {
      const std::string reply = FixedResponse(400, "Bad Request", "", false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    }
    co_return std::nullopt;
  }
  co_return parser.release();
}

asio::awaitable<Exchange> MeteringProxy::Impl::Forward(
    Listener& listener, ConnState& conn, http::request<http::string_body>& out,
    const RequestPlan& plan, bool head_request, int client_version, bool& keep_alive,
    std::chrono::steady_clock::time_point request_read) {
  const std::shared_ptr<const Upstream> upstream = listener.upstream;
  Exchange result = Exchange::kBadGateway;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = conn.up.open();
    auto before = std::chrono::steady_clock::now() - request_read;
    if (!reused) {
      if (!co_await Connect(*upstream, conn.up, listener.instance)) {
        result = Exchange::kBadGateway;
        break;
      }
    }
    if (conn.up.tls) {
      result = co_await Relay(*conn.up.tls, conn.up, conn, out, reused, plan, head_request,
                              client_version, keep_alive, listener.instance, before);
    } else {
      result = co_await Relay(*conn.up.plain, conn.up, conn, out, reused, plan, head_request,
                              client_version, keep_alive, listener.instance, before);
    }
    if (result != Exchange::kRetry) {
      break;
    }
    conn.up.Reset();
  }
  co_return result;
}

asio::awaitable<void> MeteringProxy::Impl::Serve(std::shared_ptr<Listener> listener,
                                                 std::shared_ptr<ConnState> conn) {
  // Gives the admission back however the exchange ends (also when io destroys the frame).
  struct Admitted {
    Admission* admission;
    Listener* listener;
    ~Admitted() { admission->Release(&listener->open); }
  } admitted{admission.get(), listener.get()};
  beast::flat_buffer buffer;
  while (!listener->closed) {
    error_code ec;
    std::optional<http::request<http::string_body>> read = co_await ReadRequest(*conn, buffer);
    if (!read.has_value()) {
      co_return;
    }
    const auto request_read = std::chrono::steady_clock::now();
    http::request<http::string_body>& request = *read;
    bool keep_alive = WantsKeepAlive(request.base());
    const std::string_view method(request.method_string().data(), request.method_string().size());
    std::string_view target(request.target().data(), request.target().size());
    if (!StripPathPrefix(listener->path_prefix, target)) {
      const std::string reply = FixedResponse(403, "Forbidden", kForbiddenBody, false);
      co_await asio::async_write(conn->client, asio::buffer(reply), Await(ec));
      co_return;
    }
    const RequestPlan plan = PlanRequest(method, target, request.body());
    const std::shared_ptr<const Upstream> upstream = listener->upstream;
    if (listener->blocked && plan.shape != ApiShape::kOther) {
      // The budget is spent: the call never reaches the provider (and costs nothing).
      const std::string reply = FixedResponse(429, "Too Many Requests", kBudgetBody, keep_alive);
      co_await asio::async_write(conn->client, asio::buffer(reply), Await(ec));
      if (ec || !keep_alive) {
        co_return;
      }
      continue;
    }

    http::request<http::string_body> out = UpstreamRequest(request, target, *upstream, plan);

    const bool head_request = request.method() == http::verb::head;
    const Exchange result = co_await Forward(*listener, *conn, out, plan, head_request,
                                             request.version(), keep_alive, request_read);
    if (listener->closed) {
      co_return;
    }
    switch (result) {
      case Exchange::kDone:
        break;
      case Exchange::kRetry:
      case Exchange::kBadGateway: {
        conn->up.Reset();
        log->warn("metering proxy: 502 to the agent instance={} (upstream unreachable)",
                  listener->instance);
        const std::string reply = FixedResponse(502, "Bad Gateway", kBadGatewayBody, keep_alive);
        co_await asio::async_write(conn->client, asio::buffer(reply), Await(ec));
        if (ec) {
          co_return;
        }
        break;
      }
      case Exchange::kCutOff:
      case Exchange::kClientGone:
        conn->up.Reset();
        co_return;
    }
    if (!keep_alive) {
      conn->client.socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

}  // namespace ktesio::daemon::metering
