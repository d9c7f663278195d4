#include "metering/proxy/proxy.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "ktesio/contract/status_macros.h"
#include "metering/proxy/proxy_internal.h"

namespace ktesio::daemon::metering {

using proxy_internal::Await;
using proxy_internal::ConnState;
using proxy_internal::Exchange;

namespace {

// Puts the calling thread (the proxy's) under SCHED_BATCH. Every exchange wakes the proxy twice:
// the agent's request and the provider's response. Socket wake-ups are synchronous: the woken
// thread is queued on the waker's CPU, the waker being about to wait for the answer. Under
// SCHED_OTHER the proxy then preempts the waker before it has gone to sleep, and what the proxy
// wakes in turn (the provider) lands on the other CPU, idle: a wake-up from idle costs tens of
// microseconds, in a VM the most. A batch thread does not preempt on wake-up, so it runs once
// the waker sleeps, microseconds later, and the chain stays on one warm CPU. It keeps its nice
// value and its fair share; only wake-up preemption is given up (measured in docs/benchmarks.md).
// Children never inherit it (SCHED_RESET_ON_FORK). Not on macOS, which has no such policy.
void UseBatchScheduling(spdlog::logger& log) {
#if defined(__linux__)
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(0, SCHED_BATCH | SCHED_RESET_ON_FORK, &param) != 0) {
    log.warn("metering proxy: SCHED_BATCH refused ({}); the proxy thread keeps its policy",
             std::strerror(errno));
  }
#else
  (void)log;
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<MeteringProxy>> MeteringProxy::Create(
    ProxyOptions options, OnCall on_call, std::shared_ptr<spdlog::logger> log) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->batch_window = ReportWindow(impl->options.report_window, impl->options.report_window_max);
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
    if (raw->options.batch_scheduling) {
      UseBatchScheduling(*raw->log);
    }
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
  if (impl_->io.get_executor().running_in_this_thread()) {
    impl->CloseListener(*listener);
  } else {
    // The port is free when this returns: a restart re-opens it at once, and a listener still
    // open on the proxy's thread would make that bind fail and move the agent's URL. (Bounded: a
    // proxy thread that no longer runs, at shutdown, is not waited for.)
    auto closed = std::make_shared<std::promise<void>>();
    std::future<void> done = closed->get_future();
    asio::post(impl_->io, [impl, listener, closed] {
      impl->CloseListener(*listener);
      closed->set_value();
    });
    done.wait_for(std::chrono::seconds(1));
  }
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
    socket.non_blocking(true, ec);  // WriteNow never waits
    if (ec) {
      log->warn("metering proxy: connection setup failed instance={} error={}", listener->instance,
                ec.message());
      admission->Release(&listener->open);
      socket.close(ec);
      continue;
    }
    auto conn = std::make_shared<ConnState>(std::move(socket));
    std::erase_if(listener->connections, [](const auto& weak) { return weak.expired(); });
    listener->connections.push_back(conn);
    asio::co_spawn(io, Watch(conn), asio::detached);
    asio::co_spawn(io, Serve(listener, conn), asio::detached);
  }
}

asio::awaitable<void> MeteringProxy::Impl::Watch(std::shared_ptr<ConnState> conn) {
  ConnState& state = *conn;
  co_await state.watchdog.Run(
      [&state] {
        error_code ignored;
        state.client.socket().close(ignored);
      },
      [&state] { state.up.Close(); });
}

asio::awaitable<void> MeteringProxy::Impl::Serve(std::shared_ptr<Listener> listener,
                                                 std::shared_ptr<ConnState> conn) {
  co_await Exchanges(std::move(listener), conn);
  // Not from a destructor: when io itself is torn down it destroys both frames, timer and all.
  conn->watchdog.Stop();
}

asio::awaitable<void> MeteringProxy::Impl::Exchanges(std::shared_ptr<Listener> listener,
                                                     std::shared_ptr<ConnState> conn) {
  // Gives the admission back however the exchange ends (also when io destroys the frame).
  struct Admitted {
    Admission* admission;
    Listener* listener;
    ~Admitted() { admission->Release(&listener->open); }
  } admitted{admission.get(), listener.get()};
  beast::flat_buffer buffer;
  buffer.reserve(proxy_internal::kReadBuffer);
  while (!listener->closed) {
    error_code ec;
    RequestPlanner planner;
    std::optional<AgentRequest> read =
        co_await ReadRequest(*conn, buffer, listener->path_prefix, planner);
    if (!read.has_value()) {
      co_return;
    }
    const auto request_read = std::chrono::steady_clock::now();
    AgentRequest& request = *read;
    bool keep_alive = WantsKeepAlive(request.base());
    std::string_view target(request.target().data(), request.target().size());
    if (!StripPathPrefix(listener->path_prefix, target)) {  // ReadRequest answered it 403
      co_return;
    }
    const RequestPlan plan = planner.Finish(request.body().view());
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

    const OutgoingRequest out = UpstreamRequest(request, target, *upstream, plan);

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
