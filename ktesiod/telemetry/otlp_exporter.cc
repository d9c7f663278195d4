#include "telemetry/otlp_exporter.h"

// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <openssl/ssl.h>
#include <pthread.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "ktesio/contract/error.h"
#include "ktesio/v1/version.h"
#include "telemetry/otlp.h"

namespace ktesio::daemon::telemetry {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using boost::system::error_code;
using tcp = asio::ip::tcp;

auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

constexpr auto kWarnEvery = std::chrono::minutes(1);
constexpr size_t kMaxResponseBytes = 64 * 1024;

int64_t NowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct OtlpExporter::Impl {
  OtlpConfig config;
  Collect collect;
  std::shared_ptr<spdlog::logger> log;
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
  ssl::context tls{ssl::context::tls_client};
  std::thread thread;
  // Failure bookkeeping, exporter thread only.
  uint64_t failures = 0;
  std::chrono::steady_clock::time_point last_warning;

  asio::awaitable<void> Loop();
  // One POST; "" on a 2xx answer, else what went wrong (never a header value).
  asio::awaitable<std::string> Post(std::string body);
  template <typename Stream>
  asio::awaitable<std::string> Exchange(Stream& stream, const std::string& body);
  void Outcome(const std::string& error);
};

template <typename Stream>
asio::awaitable<std::string> OtlpExporter::Impl::Exchange(Stream& stream, const std::string& body) {
  http::request<http::string_body> request(http::verb::post, config.target, 11);
  request.set(http::field::host, config.host + ":" + config.port);
  request.set(http::field::user_agent, "ktesiod/" + std::string(v1::kKtesioVersion));
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : config.headers) {
    request.set(name, value);
  }
  request.keep_alive(false);
  request.body() = body;
  request.prepare_payload();
  error_code ec;
  co_await http::async_write(stream, request, Await(ec));
  if (ec) {
    co_return absl::StrCat("sending failed: ", ec.message());
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxResponseBytes);
  co_await http::async_read(stream, buffer, parser, Await(ec));
  if (ec) {
    co_return absl::StrCat("reading the answer failed: ", ec.message());
  }
  const unsigned status = parser.get().result_int();
  if (status / 100 != 2) {
    co_return absl::StrCat("the collector answered HTTP ", status);
  }
  co_return "";
}

asio::awaitable<std::string> OtlpExporter::Impl::Post(std::string body) {
  error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = co_await resolver.async_resolve(config.host, config.port, Await(ec));
  if (ec) {
    co_return absl::StrCat("resolving ", config.host, " failed: ", ec.message());
  }
  beast::tcp_stream plain(io);
  plain.expires_after(config.timeout);
  co_await plain.async_connect(endpoints, Await(ec));
  if (ec) {
    co_return absl::StrCat("connecting failed: ", ec.message());
  }
  if (!config.tls) {
    plain.expires_after(config.timeout);
    co_return co_await Exchange(plain, body);
  }
  beast::ssl_stream<beast::tcp_stream> secure(std::move(plain), tls);
  if (!SSL_set_tlsext_host_name(secure.native_handle(), config.host.c_str())) {
    co_return "could not set the TLS server name";
  }
  secure.set_verify_callback(ssl::host_name_verification(config.host));
  beast::get_lowest_layer(secure).expires_after(config.timeout);
  co_await secure.async_handshake(ssl::stream_base::client, Await(ec));
  if (ec) {
    co_return absl::StrCat("TLS handshake failed: ", ec.message());
  }
  co_return co_await Exchange(secure, body);
}

void OtlpExporter::Impl::Outcome(const std::string& error) {
  const auto now = std::chrono::steady_clock::now();
  if (error.empty()) {
    if (failures > 0) {
      log->info("otlp export to {} works again after {} failed export(s)", config.url_shown,
                failures);
    }
    failures = 0;
    return;
  }
  ++failures;
  if (failures == 1 || now - last_warning >= kWarnEvery) {
    log->warn(
        "otlp export to {} failed: {} ({} failed export(s) since the last success; the "
        "next export carries the cumulative figures)",
        config.url_shown, error, failures);
    last_warning = now;
  }
}

asio::awaitable<void> OtlpExporter::Impl::Loop() {
  asio::steady_timer timer(io);
  while (true) {
    timer.expires_after(config.interval);
    error_code ec;
    co_await timer.async_wait(Await(ec));
    if (ec) {
      co_return;
    }
    std::optional<MetricsSnapshot> snapshot = collect();
    if (!snapshot.has_value()) {
      Outcome("the engine did not answer in time; this export was skipped");
      continue;
    }
    std::string body = RenderOtlpJson(*snapshot, config, NowUnixNs());
    // Connecting and the exchange are bounded by the export timeout.
    Outcome(co_await Post(std::move(body)));
  }
}

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Start(
    OtlpConfig config, Collect collect, std::shared_ptr<spdlog::logger> log) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->collect = std::move(collect);
  impl->log = std::move(log);
  if (impl->config.tls) {
    error_code ec;
    impl->tls.set_default_verify_paths(ec);
    if (ec) {
      return contract::MakeError(absl::StatusCode::kInvalidArgument,
                                 contract::reason::kConfigInvalid,
                                 absl::StrCat("otlp export: the system trust store could not be "
                                              "loaded: ",
                                              ec.message()));
    }
    impl->tls.set_verify_mode(ssl::verify_peer);
  }
  Impl* raw = impl.get();
  asio::co_spawn(raw->io, raw->Loop(), asio::detached);
  raw->thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "kt-otlp");
    raw->io.run();
  });
  std::vector<std::string> names;
  for (const auto& header : raw->config.headers) {
    names.push_back(header.first);
  }
  raw->log->info("otlp export to {} every {} ms (http/json; headers: {})", raw->config.url_shown,
                 raw->config.interval.count(),
                 names.empty() ? std::string("none") : absl::StrJoin(names, ", "));
  return std::unique_ptr<OtlpExporter>(new OtlpExporter(std::move(impl)));
}

OtlpExporter::OtlpExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

OtlpExporter::~OtlpExporter() {
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

}  // namespace ktesio::daemon::telemetry
