#pragma once

// The metering proxy's private parts, shared by proxy.cc (listeners, accepting, the exchange
// loop) and relay.cc (the upstream side: connect, forward, relay and meter a response). Proxy
// thread only, except where a member says otherwise.

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
#include "metering/proxy/http_message.h"
#include "metering/proxy/proxy.h"
#include "metering/proxy/report_window.h"

// This header is private to the proxy's two .cc files: these aliases are theirs.
namespace ktesio::daemon::metering {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;
}  // namespace ktesio::daemon::metering

namespace ktesio::daemon::metering::proxy_internal {

constexpr size_t kHeaderLimit = 64u << 10;
constexpr size_t kRelayBuffer = 64u << 10;
// What one socket read may take, for the agent's requests and the provider's responses. A Beast
// read asks for as much as the buffer can hold beyond what it holds (at least 512 bytes): left at
// its first small capacity, a 2 KB stream of events took five reads, five writes to the agent and
// ten timer updates where one of each does.
constexpr size_t kReadBuffer = 16u << 10;

inline auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// A non-blocking socket call that found the socket not ready (not an error). Compared by value
// and category: building an error_code from Asio's enum for each comparison showed in profiles.
inline bool WouldBlock(const error_code& ec) {
  return (ec.value() == EAGAIN || ec.value() == EWOULDBLOCK) &&
         ec.category() == boost::system::system_category();
}

// Reading a plain socket without Beast's composed operations. http::async_read_header and its
// kin nest three composed operations (each with its own handler, executor and work tracking)
// around every socket read, a tenth of the relay thread on sequential calls; these do what they
// do — Beast's read sizing, its parser calls, its handling of the end of the stream — around
// one Asio read per arrival. TLS streams keep Beast's operations.

// The room for the next read into `buffer` (Beast's sizing: what the buffer's capacity has
// beyond what it holds, at least 512 bytes, at most 64 KiB), or nothing with `ec` set when the
// buffer may not grow.
inline std::optional<beast::flat_buffer::mutable_buffers_type> ReadRoom(beast::flat_buffer& buffer,
                                                                        error_code& ec) {
  const size_t size = beast::read_size(buffer, 65536);
  if (size == 0) {
    ec = http::error::buffer_overflow;
    return std::nullopt;
  }
  return buffer.prepare(size);
}

// After a read of `n` bytes that ended with `ec`: keeps the bytes, and turns the end of the
// stream into what Beast makes of it (a message the parser had begun gets put_eof's verdict; no
// message at all is http::error::end_of_stream).
template <bool kRequest>
void AfterRead(beast::flat_buffer& buffer, size_t n, http::basic_parser<kRequest>& parser,
               error_code& ec) {
  buffer.commit(n);
  if (ec == asio::error::eof) {
    if (parser.got_some()) {
      ec = {};
      parser.put_eof(ec);
    } else {
      ec = http::error::end_of_stream;
    }
  }
}

// Reads what a plain socket holds into `room` without waiting; nothing (with `ec` clear) when it
// holds nothing yet. As with WriteNow: an asynchronous read that completes at once still costs a
// posted completion, a poll of the reactor and a coroutine resumption — on the path of every
// request and of every response's first byte, which have almost always arrived by the time they
// are read. The socket is in non-blocking mode (set when it opens).
inline std::optional<size_t> ReadNow(tcp::socket& socket,
                                     const beast::flat_buffer::mutable_buffers_type& room,
                                     error_code& ec) {
  const size_t n = socket.read_some(room, ec);
  if (WouldBlock(ec)) {
    ec = {};
    return std::nullopt;
  }
  return n;
}

// Parses what `buffer` holds and reads more until `done(parser)` holds, an error, or the end of
// the stream (after which `parser` is done or `ec` is set).
template <bool kRequest, class Done>
asio::awaitable<void> ReadParse(tcp::socket& socket, beast::flat_buffer& buffer,
                                http::basic_parser<kRequest>& parser, Done done, error_code& ec) {
  ec = {};
  while (!done(parser)) {
    if (buffer.size() > 0) {
      const size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec) {
        co_return;
      } else if (used > 0) {
        continue;
      }
    }
    std::optional<beast::flat_buffer::mutable_buffers_type> room = ReadRoom(buffer, ec);
    if (!room) {
      co_return;
    }
    std::optional<size_t> n = ReadNow(socket, *room, ec);
    while (!n) {  // nothing yet: wait until the socket is readable (it was read dry just now)
      co_await socket.async_wait(tcp::socket::wait_read, Await(ec));
      if (ec) {
        co_return;
      }
      n = ReadNow(socket, *room, ec);
    }
    AfterRead(buffer, *n, parser, ec);
    if (ec) {
      co_return;
    }
  }
}

// Reads a body of exactly `length` bytes into `body`: first what `buffer` holds (bytes after the
// body stay there: the client's next request), then straight from the socket into place. A body
// with a declared length needs no parser: read through one, a 64 KiB conversation took five reads
// into the connection's 16 KiB buffer and a copy of each into the body, on the path of the first
// token; here it is one read, most often. The body grows ahead of the reads by what it holds (at
// least 64 KiB) or by what the socket holds, whichever is more, never to the declared length at
// once: a client that declares the cap and trickles commits no more memory than 64 KiB or twice
// what it sent. The end of the stream before the last byte is http::error::partial_message (as
// Beast's parser says it). `arrived` is given the body so far after each read that leaves it
// short: it may read it while the rest is on its way (it must not keep the view).
inline asio::awaitable<void> ReadBody(tcp::socket& socket, beast::flat_buffer& buffer,
                                      size_t length, BodyBytes& body,
                                      absl::FunctionRef<void(std::string_view)> arrived,
                                      error_code& ec) {
  constexpr size_t kFirstRoom = 64u << 10;
  ec = {};
  const size_t held = std::min(length, buffer.size());
  body.Resize(held);
  asio::buffer_copy(asio::buffer(body.data(), held), buffer.data());
  buffer.consume(held);
  size_t have = held;
  while (have < length) {
    if (body.size() == have) {
      // Room for what the socket already holds, too: it was sent, so the bound stands, and a
      // large body that came in one write is moved once, not at every doubling (a 1 MiB body
      // moved four times as it came).
      error_code ignored;  // nothing known to be waiting: the doubling alone
      const size_t waiting = socket.available(ignored);
      body.Resize(std::min(length, have + std::max({kFirstRoom, have, waiting})));
    }
    const size_t n = socket.read_some(asio::buffer(body.data() + have, body.size() - have), ec);
    if (WouldBlock(ec)) {  // nothing yet: wait until the socket is readable (read dry just now)
      co_await socket.async_wait(tcp::socket::wait_read, Await(ec));
      if (ec) {
        co_return;
      }
      continue;
    }
    if (ec) {
      if (ec == asio::error::eof) {
        ec = http::error::partial_message;
      }
      co_return;
    }
    have += n;
    if (have < length) {
      arrived(std::string_view(body.data(), have));
    }
  }
}

// Writes to a plain socket as much of `pieces` as it takes at once, and returns how much (0, with
// `ec` clear, when its send buffer is full). An asynchronous write that completes at once still
// costs a posted completion and a poll of the reactor, and a coroutine frame around it; almost
// every write to a loopback socket fits its buffer. The socket is in non-blocking mode (set when
// it opens), so this never waits.
template <class Buffers>
size_t WriteNow(beast::tcp_stream& stream, const Buffers& pieces, error_code& ec) {
  const size_t written = stream.socket().write_some(pieces, ec);
  if (WouldBlock(ec)) {
    ec = {};
    return 0;
  }
  return ec ? 0 : written;
}

// What WriteNow left of `pieces` (all but the first `written` bytes), asynchronously.
template <class Buffers>
asio::awaitable<void> WriteRest(beast::tcp_stream& stream, const Buffers& pieces, size_t written,
                                error_code& ec) {
  beast::buffers_suffix<Buffers> rest(pieces);
  rest.consume(written);
  co_await asio::async_write(stream, rest, Await(ec));
}

// One connection's deadlines (the agent's side and the provider's) on one timer. A deadline on
// a beast::tcp_stream arms and cancels a timer wait around every read and write; here a deadline
// is a time stamp, moved for free. The timer never sleeps longer than the shortest duration a
// deadline was set with (the header timeout, in practice): every deadline is "now + one of those
// durations", so a new one is never earlier than the timer's wake-up and setting it touches no
// timer (only the connection's first deadline arms it). Each wake-up closes the side whose
// deadline passed (its pending operation then fails) and sleeps again.
class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Watchdog(asio::io_context& io) : timer_(io) {}

  void SetClient(Clock::duration within) { Set(client_, within); }
  void SetUpstream(Clock::duration within) { Set(upstream_, within); }
  void ClearUpstream() { upstream_ = Clock::time_point::max(); }

  // Runs until Stop, calling `close_client` or `close_upstream` when that deadline passes.
  template <class CloseClient, class CloseUpstream>
  asio::awaitable<void> Run(CloseClient close_client, CloseUpstream close_upstream) {
    while (!stopped_) {
      armed_ = std::min(client_, upstream_);
      if (tick_ != Clock::duration::max()) {
        armed_ = std::min(armed_, Clock::now() + tick_);
      }
      timer_.expires_at(armed_);
      error_code ec;
      co_await timer_.async_wait(Await(ec));
      const auto now = Clock::now();
      if (!stopped_ && client_ <= now) {
        client_ = Clock::time_point::max();
        close_client();
      }
      if (!stopped_ && upstream_ <= now) {
        upstream_ = Clock::time_point::max();
        close_upstream();
      }
    }
  }
  void Stop() {
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void Set(Clock::time_point& deadline, Clock::duration within) {
    tick_ = std::min(tick_, within);
    deadline = Clock::now() + within;
    if (deadline < armed_) {  // the first deadline, or a shorter duration than any before
      armed_ = deadline;
      timer_.expires_at(deadline);  // cancels the wait: Run wakes and waits again, until then
    }
  }

  asio::steady_timer timer_;
  Clock::time_point client_ = Clock::time_point::max();
  Clock::time_point upstream_ = Clock::time_point::max();
  Clock::time_point armed_ = Clock::time_point::max();
  Clock::duration tick_ = Clock::duration::max();  // the shortest duration Set was given
  bool stopped_ = false;
};

// One upstream connection, plain or TLS.
struct UpstreamConn {
  explicit UpstreamConn(Watchdog& deadlines) : watchdog(deadlines) {}
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;
  Watchdog& watchdog;  // the connection's, for this side's idle deadline

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
    watchdog.ClearUpstream();
  }
  // Closes the socket only (a coroutine may hold the stream): its pending operation fails.
  void Close() {
    if (plain || tls) {
      error_code ignored;
      lowest().socket().close(ignored);
    }
  }
};

struct ConnState {
  explicit ConnState(tcp::socket socket)
      : client(std::move(socket)),
        watchdog(static_cast<asio::io_context&>(client.get_executor().context())),
        up(watchdog) {}
  beast::tcp_stream client;
  Watchdog watchdog;
  UpstreamConn up;
  // Reused from call to call (their capacity is what a call would otherwise allocate anew).
  std::vector<char> relay_buffer;          // response body pieces
  std::string forward;                     // what goes to the agent next
  std::vector<asio::const_buffer> pieces;  // one gathered write to the agent
  ResponseMeter meter{ApiShape::kOther, false};
};

// Writes a response to the agent: whatever is pending (the head, until it has gone out), each
// piece of the body framed for the agent (chunked or as is) and — when `last` — the terminating
// chunk, one gathered write per piece. `on_first_write` runs before the first write (the
// proxy's added latency ends there); it is referred to, not copied, and must outlive the writer.
class ClientWriter {
 public:
  ClientWriter(ConnState& conn, std::string head, bool chunked, std::chrono::milliseconds idle,
               absl::FunctionRef<void()> on_first_write)
      : conn_(conn),
        pending_(std::move(head)),
        chunked_(chunked),
        idle_(idle),
        on_first_write_(on_first_write) {}

  // Writes what the socket takes at once; false when the agent is gone. When the socket's buffer
  // filled, unsent() is true and Finish must be awaited before `data` changes (the rest refers
  // to it). Most writes complete here, without a coroutine frame.
  bool Write(std::string_view data, bool last) {
    std::vector<asio::const_buffer>& pieces = conn_.pieces;
    pieces.clear();
    if (!pending_.empty()) {
      pieces.push_back(asio::buffer(pending_));
    }
    if (!data.empty()) {
      if (chunked_) {
        char* end = std::to_chars(size_line_, size_line_ + 16, data.size(), 16).ptr;
        *end++ = '\r';
        *end++ = '\n';
        pieces.push_back(asio::buffer(size_line_, static_cast<size_t>(end - size_line_)));
      }
      pieces.push_back(asio::buffer(data.data(), data.size()));
      if (chunked_) {
        pieces.push_back(asio::buffer("\r\n", 2));
      }
    }
    if (last && chunked_) {
      pieces.push_back(asio::buffer("0\r\n\r\n", 5));
    }
    if (pieces.empty()) {
      return true;
    }
    if (!written_) {
      written_ = true;
      on_first_write_();
    }
    error_code ec;
    conn_.watchdog.SetClient(idle_);
    written_now_ = WriteNow(conn_.client, pieces, ec);
    unsent_ = !ec && written_now_ < asio::buffer_size(pieces);
    if (!unsent_) {
      pending_.clear();
    }
    return !ec;
  }
  bool unsent() const { return unsent_; }
  // The rest of the last Write; false when the agent is gone.
  asio::awaitable<bool> Finish() {
    error_code ec;
    co_await WriteRest(conn_.client, conn_.pieces, written_now_, ec);
    unsent_ = false;
    pending_.clear();
    co_return !ec;
  }

 private:
  ConnState& conn_;
  std::string pending_;
  const bool chunked_;
  const std::chrono::milliseconds idle_;
  absl::FunctionRef<void()> on_first_write_;
  bool written_ = false;     // on_first_write_ has run
  char size_line_[24] = {};  // the current chunk's size line (a piece refers to it)
  size_t written_now_ = 0;   // what the last Write wrote at once
  bool unsent_ = false;      // the last Write left a rest for Finish
};

// How one request/response exchange ended.
enum class Exchange {
  kDone,        // response relayed completely
  kRetry,       // a reused connection failed before any response byte: retry on a fresh one
  kBadGateway,  // the upstream failed before the response head: answer 502
  kCutOff,      // the response was cut off after it began: close the client connection
  kClientGone,  // the client went away mid-response
};

}  // namespace ktesio::daemon::metering::proxy_internal

namespace ktesio::daemon::metering {

struct MeteringProxy::Impl {
  using Exchange = proxy_internal::Exchange;
  using ConnState = proxy_internal::ConnState;
  using UpstreamConn = proxy_internal::UpstreamConn;
  template <class T>
  using awaitable = boost::asio::awaitable<T>;

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
  // Set by Create from `options`; proxy thread only afterwards.
  ReportWindow batch_window{ProxyOptions().report_window, ProxyOptions().report_window_max};
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<Admission> admission;  // before io: outlives the coroutines io destroys
  asio::io_context io{1};
  // Built on first use (TlsContext): loading the system trust store parses every certificate in
  // it, about 3 MiB of heap and libcrypto pages a daemon without TLS upstreams never needs.
  std::optional<ssl::context> tls;  // proxy thread only, once the proxy thread runs
  asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
  asio::steady_timer batch_timer{io};
  // Reports the refusals a report interval held back once it ends, so a flood's summary is
  // logged even when nothing is refused after it (proxy thread only).
  asio::steady_timer pressure_timer{io};
  bool pressure_armed = false;
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
  // One connection: its exchanges, then its watchdog stopped.
  asio::awaitable<void> Serve(std::shared_ptr<Listener> listener, std::shared_ptr<ConnState> conn);
  // Request after request until the connection is over.
  asio::awaitable<void> Exchanges(std::shared_ptr<Listener> listener,
                                  std::shared_ptr<ConnState> conn);
  // The connection's deadlines (proxy_internal::Watchdog), until Serve ends.
  static asio::awaitable<void> Watch(std::shared_ptr<ConnState> conn);
  // Reads the agent's next request; nullopt when the connection is over (the agent left, or a
  // malformed or oversized request got its 400/413/431 reply, or a target outside
  // `path_prefix` its 403 — decided on the head, before any body is read or 100-continue sent).
  // `planner` is set for the request once its head is read, and reads its body as it arrives.
  asio::awaitable<std::optional<AgentRequest>> ReadRequest(ConnState& conn,
                                                           beast::flat_buffer& buffer,
                                                           std::string_view path_prefix,
                                                           RequestPlanner& planner);
  // Sends `out` upstream (once more on a fresh connection when a reused one turned out dead)
  // and relays the response.
  asio::awaitable<Exchange> Forward(Listener& listener, ConnState& conn, const OutgoingRequest& out,
                                    const RequestPlan& plan, bool head_request, int client_version,
                                    bool& keep_alive,
                                    std::chrono::steady_clock::time_point request_read);
  asio::awaitable<bool> Connect(const Upstream& upstream, UpstreamConn& up,
                                const std::string& instance);
  // Sends `out` and reads the final response head into `parser` (emplaced afresh for each head:
  // interim 1xx responses — 100 Continue, 103 Early Hints — are read and dropped, up to
  // kMaxInterimResponses; a 101 is an error, nothing asked for an upgrade): nullopt when all went
  // well, else how the exchange ends (a reused connection that failed before any response byte:
  // retry).
  template <class Stream>
  asio::awaitable<std::optional<Exchange>> SendRequest(
      Stream& upstream_stream, ConnState& conn, const OutgoingRequest& out, bool reused,
      bool head_request, std::optional<http::response_parser<http::buffer_body>>& parser,
      const std::string& instance);
  template <class Stream>
  asio::awaitable<Exchange> Relay(Stream& upstream_stream, UpstreamConn& up, ConnState& conn,
                                  const OutgoingRequest& out, bool reused, const RequestPlan& plan,
                                  bool head_request, int client_version, bool& keep_alive,
                                  const std::string& instance,
                                  std::chrono::steady_clock::duration added_before);
  void Report(const std::string& instance, const RequestPlan& plan, const ResponseMeter& meter,
              unsigned status);
  void CloseListener(Listener& listener);
  // Logs the admission summary when one is due (at most one line per interval).
  void ReportPressure(const std::string& error) {
    if (std::string line = admission->DueReport(error); !line.empty()) {
      log->warn("metering proxy: {}", line);
      return;
    }
    if (pressure_armed || !admission->HasUnreported()) {
      return;
    }
    // Held back by the interval: reported when it ends, whether or not more is refused.
    pressure_armed = true;
    pressure_timer.expires_after(Admission::kReportInterval);
    pressure_timer.async_wait([this, error](const error_code& ec) {
      pressure_armed = false;
      if (!ec) {
        ReportPressure(error);
      }
    });
  }
};

}  // namespace ktesio::daemon::metering
