// Metering-proxy benchmark tools (bench/run.sh drives them):
//
//   ktesio_proxy_bench upstream PORT_FILE
//       a fast loopback model provider: POST */chat/completions answers a small JSON body with
//       usage, or (with "stream":true) 20 SSE chunks, a usage chunk and [DONE], chunked; model
//       "slow-first" waits 20 ms after the first chunk (so time-to-first-token is measurable
//       apart from the whole response). One Asio thread, keep-alive.
//   ktesio_proxy_bench latency BASE_URL N [PROMPT_BYTES [PATH]]
//       N sequential keep-alive calls each of: small JSON call (full round trip) and streamed
//       call (time to the first SSE chunk); prints p50/p99 in microseconds. With PROMPT_BYTES,
//       both calls carry a conversation of about that size (an agent's history), as agents send.
//       PATH (below the base URL, /chat/completions by default) is where they are posted: the
//       upstream answers every path alike, so /responses measures a body the proxy never edits.
//   ktesio_proxy_bench throughput BASE_URL CONNECTIONS SECONDS
//       CONNECTIONS keep-alive clients each streaming calls back to back; prints calls/s.
//   ktesio_proxy_bench plan PROMPT_BYTES N
//       the proxy's request planning (metering::PlanRequest, in process) of the latency calls'
//       two bodies with that conversation, N times each; prints microseconds per call. The
//       streamed call's is on the path of its first token: its body is validated whole and
//       include_usage spliced in. The *_last_piece figures are the same plans made as the body
//       arrives in 64 KiB pieces (metering::RequestPlanner): only what is left once the last
//       piece is in is timed, the part of planning a large body that the proxy cannot overlap
//       with its arrival.

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "metering/usage_extract.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kUsageJson[] =
    R"({"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",)"
    R"("content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,)"
    R"("completion_tokens":5,"total_tokens":17}})";

std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string SseEvent(int i) {
  return "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
         "\"delta\":{\"content\":\"token" +
         std::to_string(i) + "\"}}],\"usage\":null}\n\n";
}

asio::awaitable<void> ServeUpstream(tcp::socket socket) {
  beast::flat_buffer buffer;
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  socket.set_option(tcp::no_delay(true));
  while (true) {
    http::request_parser<http::string_body> request;
    request.body_limit(64u << 20);  // Beast's default, 1 MiB, would refuse a large conversation
    co_await http::async_read(socket, buffer, request, token);
    if (ec) co_return;
    const std::string& body = request.get().body();
    const bool stream = body.find("\"stream\":true") != std::string::npos;
    if (!stream) {
      std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(sizeof(kUsageJson) - 1) + "\r\n\r\n" + kUsageJson;
      co_await asio::async_write(socket, asio::buffer(reply), token);
      if (ec) co_return;
      continue;
    }
    const bool slow = body.find("slow-first") != std::string::npos;
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
        Chunk(SseEvent(0));
    co_await asio::async_write(socket, asio::buffer(head), token);
    if (ec) co_return;
    if (slow) {
      asio::steady_timer timer(socket.get_executor(), std::chrono::milliseconds(20));
      co_await timer.async_wait(token);
    }
    std::string rest;
    for (int i = 1; i < 20; ++i) rest += Chunk(SseEvent(i));
    if (body.find("include_usage") != std::string::npos) {
      rest += Chunk(
          "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,"
          "\"completion_tokens\":20,\"total_tokens\":32}}\n\n");
    }
    rest += Chunk("data: [DONE]\n\n") + "0\r\n\r\n";
    co_await asio::async_write(socket, asio::buffer(rest), token);
    if (ec) co_return;
  }
}

asio::awaitable<void> AcceptUpstream(tcp::acceptor& acceptor) {
  while (true) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(acceptor.get_executor(), ServeUpstream(std::move(socket)), asio::detached);
  }
}

int Upstream(const std::string& port_file) {
  asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  std::ofstream(port_file) << acceptor.local_endpoint().port() << "\n";
  asio::co_spawn(io, AcceptUpstream(acceptor), asio::detached);
  io.run();
  return 0;
}

// A blocking keep-alive HTTP/1.1 client for one connection.
class Client {
 public:
  Client(const std::string& host, int port, std::string prefix,
         std::string path = "/chat/completions")
      : prefix_(std::move(prefix)), path_(std::move(path)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      std::perror("connect");
      std::exit(1);
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Client() { close(fd_); }

  // Sends one call; returns {microseconds to the first body byte, to the end}.
  std::pair<double, double> Call(const std::string& body) {
    const std::string request = "POST " + prefix_ + path_ +
                                " HTTP/1.1\r\nHost: bench\r\n"
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    const Clock::time_point t0 = Clock::now();
    if (write(fd_, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
      std::perror("write");
      std::exit(1);
    }
    // Head.
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) Fill();
    std::string head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head.find(" 200 ") == std::string::npos) {
      std::fprintf(stderr, "bad response: %s\n", head.c_str());
      std::exit(1);
    }
    double first = -1;
    if (size_t at = head.find("content-length:"); at != std::string::npos) {
      const size_t length = std::stoul(head.substr(at + 15));
      while (buffer_.size() < length) Fill();
      first = Micros(t0);
      buffer_.erase(0, length);
      return {first, first};
    }
    // Chunked: read chunks until the last one.
    while (true) {
      size_t eol;
      while ((eol = buffer_.find("\r\n")) == std::string::npos) Fill();
      const size_t size = std::stoul(buffer_.substr(0, eol), nullptr, 16);
      while (buffer_.size() < eol + 2 + size + 2) Fill();
      buffer_.erase(0, eol + 2 + size + 2);
      if (size == 0) break;
      if (first < 0) first = Micros(t0);
    }
    return {first, Micros(t0)};
  }

 private:
  static double Micros(Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  void Fill() {
    char chunk[65536];
    ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n <= 0) {
      std::fprintf(stderr, "connection closed\n");
      std::exit(1);
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  int fd_;
  std::string prefix_;
  std::string path_;
  std::string buffer_;
};

struct Url {
  std::string host;
  int port = 0;
  std::string prefix;
};

Url ParseUrl(const std::string& url) {  // http://HOST:PORT[/prefix]
  Url out;
  std::string rest = url.substr(url.find("://") + 3);
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  out.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  out.host = authority.substr(0, authority.find(':'));
  out.port = std::stoi(authority.substr(authority.find(':') + 1));
  return out;
}

double Percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, static_cast<size_t>(p * samples.size()))];
}

// A conversation of about `bytes` bytes as an agent sends it: messages of prose with the escapes
// JSON text carries (newlines, quotes, a \u escape), "" for none.
std::string Conversation(size_t bytes) {
  std::string messages;
  const std::string line =
      R"(The function \"Relay\" copies what the provider sent.\nIt returns when the body ends \u2014 or fails. )";
  while (messages.size() < bytes) {
    std::string content;
    while (content.size() < 2000) content += line;
    messages += std::string(messages.empty() ? "" : ",") + R"({"role":")" +
                (messages.size() % 2 == 0 ? "user" : "assistant") + R"(","content":")" + content +
                R"("})";
  }
  return messages;
}

int Latency(const std::string& base, int n, size_t prompt_bytes, const std::string& path) {
  const Url url = ParseUrl(base);
  Client client(url.host, url.port, url.prefix, path);
  const std::string history = Conversation(prompt_bytes);
  const std::string json_body =
      R"({"model":"m","messages":[)" +
      (history.empty() ? std::string(R"({"role":"user","content":"hi"})") : history) + "]}";
  const std::string stream_body =
      R"({"model":"slow-first","stream":true,"messages":[)" + history + "]}";
  std::vector<double> json, ttft, stream_total;
  for (int i = 0; i < n + n / 10; ++i) {  // the first 10% warm up
    const auto small = client.Call(json_body);
    const auto streamed = client.Call(stream_body);
    if (i >= n / 10) {
      json.push_back(small.second);
      ttft.push_back(streamed.first);
      stream_total.push_back(streamed.second);
    }
  }
  std::printf("json_call_p50_us %.0f\njson_call_p99_us %.0f\n", Percentile(json, 0.5),
              Percentile(json, 0.99));
  std::printf("ttft_p50_us %.0f\nttft_p99_us %.0f\n", Percentile(ttft, 0.5),
              Percentile(ttft, 0.99));
  return 0;
}

int Throughput(const std::string& base, int connections, int seconds) {
  const Url url = ParseUrl(base);
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&] {
      Client client(url.host, url.port, url.prefix);
      while (!stop) {
        client.Call(R"({"model":"m","stream":true,"messages":[]})");
        ++calls;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (std::thread& t : threads) t.join();
  std::printf("stream_calls_per_second %.0f\n", static_cast<double>(calls) / seconds);
  return 0;
}

int Plan(size_t prompt_bytes, int n) {
  const std::string history = Conversation(prompt_bytes);
  const std::string bodies[] = {
      R"({"model":"m","messages":[)" + history + "]}",
      R"({"model":"slow-first","stream":true,"messages":[)" + history + "]}"};
  const char* names[] = {"plan_json_call_us", "plan_streamed_call_us"};
  for (int kind = 0; kind < 2; ++kind) {
    size_t spliced = 0;  // used, so that the planning cannot be optimized away
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      const ktesio::daemon::metering::RequestPlan plan =
          ktesio::daemon::metering::PlanRequest("POST", "/v1/chat/completions", bodies[kind]);
      spliced += plan.edit.has_value() ? plan.edit->EditedSize(bodies[kind].size()) : 0;
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if ((kind == 1) != (spliced > 0)) {
      std::fprintf(stderr, "plan: include_usage was %sspliced into the %s call\n",
                   spliced > 0 ? "" : "not ", kind == 1 ? "streamed" : "JSON");
      return 1;
    }
    std::printf("%s %.2f\n", names[kind], took.count() / n);
    // As the proxy plans it: piece by piece as it arrives, then what is left at the last piece.
    constexpr size_t kPiece = 64u << 10;
    std::chrono::steady_clock::duration last_piece{};
    const std::string_view body = bodies[kind];
    for (int i = 0; i < n; ++i) {
      ktesio::daemon::metering::RequestPlanner planner("POST", "/v1/chat/completions");
      for (size_t at = kPiece; at < body.size(); at += kPiece) {
        planner.Arrived(body.substr(0, at));
      }
      const auto finish = std::chrono::steady_clock::now();
      const ktesio::daemon::metering::RequestPlan plan = planner.Finish(body);
      last_piece += std::chrono::steady_clock::now() - finish;
      if ((kind == 1) != plan.edit.has_value()) {
        std::fprintf(stderr, "plan: the plan made as the body arrived differs\n");
        return 1;
      }
    }
    std::printf("%s_last_piece %.2f\n", names[kind],
                std::chrono::duration<double, std::micro>(last_piece).count() / n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "upstream") return Upstream(args[1]);
  if (args.size() >= 3 && args.size() <= 5 && args[0] == "latency") {
    return Latency(args[1], std::stoi(args[2]), args.size() >= 4 ? std::stoul(args[3]) : 0,
                   args.size() == 5 ? args[4] : "/chat/completions");
  }
  if (args.size() == 4 && args[0] == "throughput") {
    return Throughput(args[1], std::stoi(args[2]), std::stoi(args[3]));
  }
  if (args.size() == 3 && args[0] == "plan") {
    return Plan(std::stoul(args[1]), std::stoi(args[2]));
  }
  std::fprintf(stderr,
               "usage: ktesio_proxy_bench upstream PORT_FILE | latency URL N [PROMPT_BYTES] | "
               "throughput URL CONNECTIONS SECONDS | plan PROMPT_BYTES N\n");
  return 2;
}
