// The upstream side of one exchange: connecting (plain or TLS), forwarding the agent's request,
// and relaying the response while metering it. Reading the agent's request is here too: it is
// the other half of the exchange, the part that answers malformed input.

#include <openssl/ssl.h>

#include <array>
#include <limits>
#include <type_traits>

#include "metering/proxy/proxy_internal.h"

// GCC 12 at -O2 can take an Asio coroutine frame's own operator new/delete pair
// (awaitable_frame_base) for a mismatch, depending on what it inlined into the frame
// (-Wmismatched-new-delete, a false positive: both are the frame class's own). Clang and the
// debug build do not warn.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace ktesio::daemon::metering {

using proxy_internal::Await;
using proxy_internal::ClientWriter;
using proxy_internal::ConnState;
using proxy_internal::Exchange;
using proxy_internal::kHeaderLimit;
using proxy_internal::kRelayBuffer;
using proxy_internal::UpstreamConn;

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
  up.buffer.reserve(proxy_internal::kReadBuffer);
  up.lowest().expires_after(options.connect_timeout);
  co_await up.lowest().async_connect(results, Await(ec));
  if (ec) {
    log->warn("metering proxy: upstream connect failed ({})", ec.message());
    CountError(instance, "connect");
    up.Reset();
    co_return false;
  }
  up.lowest().socket().set_option(tcp::no_delay(true), ec);
  up.lowest().socket().non_blocking(true, ec);  // SendRequest's first attempt never waits
  if (ec) {
    log->warn("metering proxy: upstream socket setup failed ({})", ec.message());
    CountError(instance, "connect");
    up.Reset();
    co_return false;
  }
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
  up.lowest().expires_never();  // from here the connection's Watchdog keeps the deadline
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
  record.model = plan.model;
  // Hand records over in small batches: a cross-thread wakeup per call would cost the calls
  // themselves latency. The batch window bounds how late a budget sees the usage.
  batch.push_back(std::move(record));
  if (!batch_armed) {
    batch_armed = true;
    batch_timer.expires_after(batch_window.Begin(std::chrono::steady_clock::now()));
    batch_timer.async_wait([this](const error_code&) {
      batch_armed = false;
      std::vector<CallRecord> ready;
      ready.swap(batch);
      batch_window.Handed(ready.size(), std::chrono::steady_clock::now());
      on_call(std::move(ready));
    });
  }
}

namespace {

// Parses what is already buffered from the provider, without I/O (Beast yields one chunk per
// step), and feeds each piece of body to the meter: the agent then gets one write per arrival
// from the provider, not one per chunk. Leaves `ec` set on a parse error.
void DrainBuffered(http::response_parser<http::buffer_body>& parser, beast::flat_buffer& from,
                   std::vector<char>& body, ResponseMeter& meter, std::string& forward,
                   error_code& ec) {
  auto& response = parser.get();
  while (!parser.is_done() && from.size() > 0) {
    response.body().data = body.data();
    response.body().size = body.size();
    const size_t used = parser.put(from.data(), ec);
    from.consume(used);
    if (ec == http::error::need_buffer) {
      ec = {};
    }
    const size_t got = body.size() - response.body().size;
    meter.Feed(std::string_view(body.data(), got), forward);
    if (ec == http::error::need_more) {
      ec = {};
      return;
    }
    if (ec || (used == 0 && got == 0)) {
      return;
    }
  }
}

}  // namespace

// Interim responses dropped before the final one; more is a provider talking nonsense.
constexpr int kMaxInterimResponses = 8;

template <class Stream>
asio::awaitable<std::optional<Exchange>> MeteringProxy::Impl::SendRequest(
    Stream& upstream_stream, ConnState& conn, const OutgoingRequest& out, bool reused,
    bool head_request, std::optional<http::response_parser<http::buffer_body>>& parser,
    const std::string& instance) {
  UpstreamConn& up = conn.up;
  error_code ec;
  conn.watchdog.SetUpstream(options.idle_timeout);
  const std::array<asio::const_buffer, 4> request = out.Wire();
  if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
    const size_t written = proxy_internal::WriteNow(upstream_stream, request, ec);
    if (!ec && written < asio::buffer_size(request)) {
      co_await proxy_internal::WriteRest(upstream_stream, request, written, ec);
    }
  } else {
    co_await asio::async_write(upstream_stream, request, Await(ec));
  }
  if (ec) {
    log->debug("metering proxy: upstream write failed reused={} ({})", reused, ec.message());
    if (!reused) {
      CountError(instance, "write");
    }
    co_return reused ? Exchange::kRetry : Exchange::kBadGateway;
  }
  for (int interim = 0;; ++interim) {
    // A parser is done after one message: each head gets its own.
    parser.emplace();
    parser->header_limit(kHeaderLimit);
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // responses: unbounded
    if (head_request) {
      parser->skip(true);
    }
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      parser->eager(false);
      co_await proxy_internal::ReadParse(
          upstream_stream.socket(), up.buffer, *parser,
          [](const auto& p) { return p.is_header_done(); }, ec);
    } else {
      co_await http::async_read_header(upstream_stream, up.buffer, *parser, Await(ec));
    }
    if (ec) {
      log->warn("metering proxy: reading the upstream response head failed ({})", ec.message());
      const bool retry = reused && interim == 0 && up.buffer.size() == 0;
      if (!retry) {
        CountError(instance, "response_head");
      }
      co_return retry ? Exchange::kRetry : Exchange::kBadGateway;
    }
    const unsigned status = parser->get().result_int();
    if (status < 100 || status >= 200) {
      co_return std::nullopt;
    }
    if (status == 101 || interim + 1 > kMaxInterimResponses) {
      log->warn("metering proxy: the upstream answered {} ({})", status,
                status == 101 ? "an upgrade nothing asked for" : "too many interim responses");
      CountError(instance, "response_head");
      co_return Exchange::kBadGateway;  // the caller closes the connection
    }
  }
}

// One loop relays the whole body, so its length (~115 lines with comments) is stated: each turn
// drains what the provider sent, writes it to the agent in one go and waits for more, and every way
// out (done, agent gone, provider cut off) must report the call exactly once.
template <class Stream>
asio::awaitable<Exchange> MeteringProxy::Impl::Relay(
    Stream& upstream_stream, UpstreamConn& up, ConnState& conn, const OutgoingRequest& out,
    bool reused, const RequestPlan& plan, bool head_request, int client_version, bool& keep_alive,
    const std::string& instance, std::chrono::steady_clock::duration added_before) {
  std::optional<http::response_parser<http::buffer_body>> final_head;
  if (std::optional<Exchange> failed = co_await SendRequest(upstream_stream, conn, out, reused,
                                                            head_request, final_head, instance)) {
    co_return *failed;
  }
  http::response_parser<http::buffer_body>& parser = *final_head;
  // The proxy's own time before the first byte: what it spent before the upstream write, plus
  // from the latest arrival from the provider to the first write to the agent.
  auto arrived = std::chrono::steady_clock::now();
  auto& response = parser.get();
  const unsigned status = response.result_int();
  ResponseMeter& meter = conn.meter;
  meter.Reset(plan.shape, plan.injected(), out.post);
  meter.Begin(status, std::string_view(response[http::field::content_type].data(),
                                       response[http::field::content_type].size()));
  const ResponseFraming framing =
      ChooseFraming(status, head_request, parser.content_length().has_value(), plan.injected(),
                    client_version, keep_alive);
  // Named: the writer refers to it (absl::FunctionRef), so it must outlive the writer.
  const auto observe_added = [&] {
    ObserveAdded(instance, added_before + (std::chrono::steady_clock::now() - arrived));
  };
  ClientWriter writer(
      conn, ResponseHead(response.base(), framing, parser.content_length().value_or(0), keep_alive),
      framing == ResponseFraming::kChunked, options.idle_timeout, observe_added);
  std::vector<char>& buffer = conn.relay_buffer;
  buffer.resize(kRelayBuffer);
  std::string& forward = conn.forward;
  forward.clear();
  bool done = parser.is_done();
  // A stream's head goes out at once (the agent is waiting for its first token); a plain body's
  // head goes out with the body's first bytes (and a stream's with its first event when that
  // arrived with the head).
  bool head_now = (meter.streaming() && up.buffer.size() == 0) || done;
  error_code ec;
  while (true) {
    DrainBuffered(parser, up.buffer, buffer, meter, forward, ec);  // none when done or empty
    if (ec) {
      break;
    }
    done = parser.is_done();
    // An event stream's meter may release held bytes at the end, so it finishes before the last
    // write; a JSON body's usage is parsed after it (the agent does not wait for the parse).
    if (done && meter.streaming()) {
      meter.Finish(true, forward);
    }
    if (!forward.empty() || done || head_now) {
      head_now = false;
      bool sent = writer.Write(forward, done);
      if (sent && writer.unsent()) {
        sent = co_await writer.Finish();
      }
      if (!sent) {
        if (!done) {
          meter.Finish(false, forward);
        } else if (!meter.streaming()) {
          meter.Finish(true, forward);  // the provider's body was whole: its usage counts
        }
        Report(instance, plan, meter, status);  // the provider took the call: it counts
        co_return Exchange::kClientGone;
      }
      forward.clear();
    }
    if (done) {
      if (!meter.streaming()) {
        meter.Finish(true, forward);  // appends nothing: only an event stream holds bytes back
      }
      break;
    }
    // Wait for the provider's next piece: a plain socket's is read as is (the next turn parses
    // it), a TLS stream's is parsed into `buffer` (the next turn drains the rest).
    conn.watchdog.SetUpstream(options.idle_timeout);
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      if (auto room = proxy_internal::ReadRoom(up.buffer, ec)) {
        tcp::socket& socket = upstream_stream.socket();
        std::optional<size_t> n = proxy_internal::ReadNow(socket, *room, ec);
        while (!n && !ec) {  // nothing yet: wait until the provider sends more
          co_await socket.async_wait(tcp::socket::wait_read, Await(ec));
          if (!ec) {
            n = proxy_internal::ReadNow(socket, *room, ec);
          }
        }
        proxy_internal::AfterRead(up.buffer, n.value_or(0), parser, ec);
      }
      arrived = std::chrono::steady_clock::now();
      if (ec) {
        break;
      }
      continue;
    }
    response.body().data = buffer.data();
    response.body().size = buffer.size();
    co_await http::async_read_some(upstream_stream, up.buffer, parser, Await(ec));
    arrived = std::chrono::steady_clock::now();
    if (ec == http::error::need_buffer) {
      ec = {};
    }
    meter.Feed(std::string_view(buffer.data(), buffer.size() - response.body().size), forward);
    if (ec) {
      break;
    }
  }
  const bool cut = static_cast<bool>(ec);
  if (cut) {  // the provider cut the body off (or sent a malformed one): relay what came
    CountError(instance, "cut");
    meter.Finish(false, forward);
    if (writer.Write(forward, false) && writer.unsent()) {  // no terminating chunk
      co_await writer.Finish();
    }
  }
  Report(instance, plan, meter, status);  // after the last byte went out
  if (cut) {
    co_return Exchange::kCutOff;
  }
  if (!WantsKeepAlive(response.base())) {
    up.Reset();
  }
  // The connection waits for the agent's next call with small buffers: what an oversized body
  // grew is released (the call is reported, the meter's state is no longer needed).
  meter.Reset(ApiShape::kOther, false);
  if (forward.capacity() > ResponseMeter::kKeptCapacity) {
    std::string().swap(forward);
  }
  co_return Exchange::kDone;
}

asio::awaitable<std::optional<AgentRequest>> MeteringProxy::Impl::ReadRequest(
    ConnState& conn, beast::flat_buffer& buffer, std::string_view path_prefix,
    RequestPlanner& planner) {
  error_code ec;
  http::request_parser<RequestBody> parser;
  parser.header_limit(kHeaderLimit);
  // No limit while the head is read: Beast would judge a declared Content-Length before the path
  // is, and a stranger must get 403 whatever it declares. The limit is set once the path is ours.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  // A head must arrive within header_timeout: a client that opens and idles, or trickles its
  // head, gives its descriptor back soon (the whole body then has idle_timeout to arrive).
  conn.watchdog.SetClient(options.header_timeout);
  tcp::socket& socket = conn.client.socket();
  parser.eager(false);
  co_await proxy_internal::ReadParse(
      socket, buffer, parser, [](const auto& p) { return p.is_header_done(); }, ec);
  conn.watchdog.SetClient(options.idle_timeout);
  if (ec) {
    if (ec == http::error::header_limit) {
      const std::string reply =
          FixedResponse(431, "Request Header Fields Too Large", kHeadersTooLargeBody, false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
               ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor &&
               ec != asio::error::connection_reset) {
      const std::string reply = FixedResponse(400, "Bad Request", kBadRequestBody, false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    }
    co_return std::nullopt;
  }
  const auto& head = parser.get();
  // Only a caller that knows the agent's secret base path gets a body read (up to
  // max_request_bytes, held for idle_timeout): anyone else is answered on the head alone.
  std::string_view target(head.target().data(), head.target().size());
  if (!StripPathPrefix(path_prefix, target)) {
    const std::string reply = FixedResponse(403, "Forbidden", kForbiddenBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  // Not a tunnel: a CONNECT forwarded to the provider could turn the kept-alive upstream
  // connection into one, and the metering after it into nonsense.
  if (head.method() == http::verb::connect) {
    // RFC 9110 asks a 405 to say what is allowed: everything else is forwarded.
    const std::string reply =
        FixedResponse(405, "Method Not Allowed", kMethodNotAllowedBody, false,
                      "Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n");
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  // Only chunked, once and last, is understood (RFC 9112 §6.1, §6.3): with any other coding the
  // body's end is unknown or its bytes would reach the provider misdescribed, and what follows on
  // the connection cannot be trusted to be a next request. Answered and closed.
  if (const TransferCoding coding = RequestTransferCoding(head);
      coding == TransferCoding::kInvalid || coding == TransferCoding::kUnsupported) {
    const std::string reply =
        coding == TransferCoding::kInvalid
            ? FixedResponse(400, "Bad Request", kTransferCodingBody, false)
            : FixedResponse(501, "Not Implemented", kUnsupportedCodingBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  if (parser.content_length().value_or(0) > options.max_request_bytes) {  // declared over the cap
    const std::string reply = FixedResponse(413, "Payload Too Large", kTooLargeBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  parser.body_limit(options.max_request_bytes);  // a chunked body is counted as it arrives
  if (beast::iequals(head[http::field::expect], "100-continue")) {
    co_await asio::async_write(conn.client, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25),
                               Await(ec));
  }
  // A declared length (within the cap, checked above) is read into place; a chunked body through
  // the parser, which removes the chunking and counts it against the cap as it arrives.
  // The body is planned as it arrives (a chunked one once it is whole).
  planner = RequestPlanner(
      std::string_view(head.method_string().data(), head.method_string().size()), target);
  if (!parser.chunked()) {
    const size_t length = parser.content_length().value_or(0);
    AgentRequest request = parser.release();
    co_await proxy_internal::ReadBody(
        socket, buffer, length, request.body(),
        [&planner](std::string_view so_far) { planner.Arrived(so_far); }, ec);
    if (ec) {
      if (ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor) {
        const std::string reply = FixedResponse(400, "Bad Request", kBadRequestBody, false);
        co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
      }
      co_return std::nullopt;
    }
    co_return request;
  }
  // The body: parsed from what the head's read brought (most requests arrive whole), then read.
  const auto head_fields = std::distance(head.begin(), head.end());
  parser.eager(true);
  co_await proxy_internal::ReadParse(
      socket, buffer, parser, [](const auto& p) { return p.is_done(); }, ec);
  // A chunked body's trailer fields are merged into the head by the parser: dropped (RFC 9110
  // §6.5.1 lets a recipient that removes the chunking discard them), never forwarded as header
  // fields nobody checked.
  for (auto field = std::next(parser.get().begin(), head_fields); field != parser.get().end();) {
    field = parser.get().erase(field);
  }
  if (ec == http::error::body_limit) {
    const std::string reply = FixedResponse(413, "Payload Too Large", kTooLargeBody, false);
    co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    co_return std::nullopt;
  }
  if (ec) {
    if (ec != asio::error::eof && ec != http::error::end_of_stream &&
        ec != asio::error::operation_aborted) {
      const std::string reply = FixedResponse(400, "Bad Request", kBadRequestBody, false);
      co_await asio::async_write(conn.client, asio::buffer(reply), Await(ec));
    }
    co_return std::nullopt;
  }
  co_return parser.release();
}

asio::awaitable<Exchange> MeteringProxy::Impl::Forward(
    Listener& listener, ConnState& conn, const OutgoingRequest& out, const RequestPlan& plan,
    bool head_request, int client_version, bool& keep_alive,
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

}  // namespace ktesio::daemon::metering
