// Benchmarks that need an API client: unary RPC latency (against ktesiod and against a bare
// callback-API server answering the same RPC, side by side), and concurrent starts.
//
//   ktesio_bench echo-server SOCKET            serve a constant GetVersion (the bare baseline);
//                                              SIGUSR1 trims its working set the way an idle
//                                              ktesiod does (ktesiod/memory/trim.h)
//   ktesio_bench rpc SOCKET N METHOD           N sequential calls; METHOD = version|status|list
//   ktesio_bench start SOCKET PREFIX N MARKER  start PREFIX0..PREFIX{N-1} concurrently; agents
//                                              are counted as spawned by MARKER in their argv
//
// Prints `key value` lines; bench/run.sh collects them. Times are wall-clock on a shared,
// noisy machine: compare figures measured in the same run only.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "ktesio/v1/agent.grpc.pb.h"
#include "ktesio/v1/system.grpc.pb.h"
#include "memory/trim.h"

namespace {

using Clock = std::chrono::steady_clock;

class BareSystemService final : public ktesio::v1::SystemService::CallbackService {
  grpc::ServerUnaryReactor* GetVersion(grpc::CallbackServerContext* ctx,
                                       const ktesio::v1::GetVersionRequest*,
                                       ktesio::v1::GetVersionResponse* response) override {
    response->set_api_version("1.0.0");
    response->set_api_major(1);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int EchoServer(const std::string& socket) {
  // SIGUSR1 (the idle trim) and SIGUSR2 (the daemon's release of start-up code) are taken by a
  // thread of its own (blocked everywhere else, before gRPC starts any).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    for (int signal = 0; sigwait(&signals, &signal) == 0;) {
      auto report = signal == SIGUSR1 ? ktesio::daemon::memory::TrimWorkingSet()
                                      : ktesio::daemon::memory::ReleaseCode();
      if (report.ok()) {
        std::fprintf(stderr, "%s: resident %lu -> %lu KiB\n",
                     signal == SIGUSR1 ? "trimmed" : "code released",
                     static_cast<unsigned long>(report->rss_before_kib),
                     static_cast<unsigned long>(report->rss_after_kib));
      }
    }
  }).detach();
  BareSystemService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "cannot listen on %s\n", socket.c_str());
    return 1;
  }
  server->Wait();
  return 0;
}

double Percentile(std::vector<double>& samples, double p) {
  std::sort(samples.begin(), samples.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(samples.size() - 1));
  return samples[index];
}

int Rpc(const std::string& socket, int n, const std::string& method) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto system = ktesio::v1::SystemService::NewStub(channel);
  auto agents = ktesio::v1::AgentService::NewStub(channel);
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n + 100; ++i) {  // the first 100 warm the connection up
    grpc::ClientContext ctx;
    Clock::time_point start = Clock::now();
    grpc::Status status;
    if (method == "version") {
      ktesio::v1::GetVersionResponse response;
      status = system->GetVersion(&ctx, ktesio::v1::GetVersionRequest(), &response);
    } else if (method == "status") {
      ktesio::v1::GetStatusResponse response;
      status = system->GetStatus(&ctx, ktesio::v1::GetStatusRequest(), &response);
    } else {
      ktesio::v1::ListAgentsResponse response;
      status = agents->ListAgents(&ctx, ktesio::v1::ListAgentsRequest(), &response);
    }
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (!status.ok()) {
      std::fprintf(stderr, "call failed: %s\n", status.error_message().c_str());
      return 1;
    }
    if (i >= 100) {
      samples.push_back(us);
    }
  }
  std::printf("rpc_%s_p50_us %.1f\n", method.c_str(), Percentile(samples, 0.50));
  std::printf("rpc_%s_p99_us %.1f\n", method.c_str(), Percentile(samples, 0.99));
  return 0;
}

int Start(const std::string& socket, const std::string& prefix, int n, const std::string& marker) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto agents = ktesio::v1::AgentService::NewStub(channel);
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    ktesio::v1::StartAgentResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<ktesio::v1::StartAgentResponse>> reader;
  };
  std::vector<std::unique_ptr<Call>> calls;
  Clock::time_point start = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto call = std::make_unique<Call>();
    ktesio::v1::StartAgentRequest request;
    request.set_name(prefix + std::to_string(i));
    call->reader = agents->AsyncStartAgent(&call->ctx, request, &cq);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  // Spawned = that many agent processes exist. Counted from /proc (agents run with `marker` in
  // their argv) so that measuring does not load the daemon being measured.
  std::thread spawned_probe([&] {
    while (true) {
      int with_pid = 0;
      for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        std::ifstream cmdline(entry.path() / "cmdline");
        std::string text((std::istreambuf_iterator<char>(cmdline)),
                         std::istreambuf_iterator<char>());
        with_pid +=
            text.find(marker) != std::string::npos && text.find("ktesio-shim") == std::string::npos
                ? 1
                : 0;
      }
      if (with_pid >= n) {
        std::printf("start_%d_all_spawned_ms %.1f\n", n,
                    std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        return;
      }
    }
  });
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    void* tag = nullptr;
    bool got = false;
    cq.Next(&tag, &got);
    Call* call = static_cast<Call*>(tag);
    ok += call->status.ok() && call->response.instance().state() == ktesio::v1::AGENT_STATE_RUNNING
              ? 1
              : 0;
  }
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  spawned_probe.join();
  std::printf("start_%d_all_running_ms %.1f\n", n, ms);
  std::printf("start_%d_running_count %d\n", n, ok);
  return ok == n ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "echo-server") {
    return EchoServer(args[1]);
  }
  if (args.size() == 4 && args[0] == "rpc") {
    return Rpc(args[1], std::atoi(args[2].c_str()), args[3]);
  }
  if (args.size() == 5 && args[0] == "start") {
    return Start(args[1], args[2], std::atoi(args[3].c_str()), args[4]);
  }
  std::fprintf(stderr, "usage: see the comment at the top of bench/ktesio_bench.cc\n");
  return 2;
}
