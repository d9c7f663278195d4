#include "loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ktesio::tck {
namespace {

// Reads one request (headers + Content-Length body) from `fd`. Returns its target, "" on error.
std::string ReadRequest(int fd, std::string* body) {
  std::string data;
  char buffer[4096];
  size_t head_end = std::string::npos;
  size_t length = 0;
  while (true) {
    if (head_end == std::string::npos) {
      head_end = data.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string lower = data.substr(0, head_end);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const size_t at = lower.find("\r\ncontent-length:");
        if (at != std::string::npos) length = std::stoul(lower.substr(at + 17));
      }
    }
    if (head_end != std::string::npos && data.size() >= head_end + 4 + length) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return "";
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) return "";
    data.append(buffer, static_cast<size_t>(n));
  }
  *body = data.substr(head_end + 4, length);
  const size_t first = data.find(' ');
  const size_t second = data.find(' ', first + 1);
  if (first == std::string::npos || second == std::string::npos) return "";
  return data.substr(first + 1, second - first - 1);
}

void WriteAll(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    ssize_t n = write(fd, text.data() + sent, text.size() - sent);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

LoopbackProvider::LoopbackProvider() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

LoopbackProvider::~LoopbackProvider() {
  stop_ = true;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::vector<std::string> LoopbackProvider::Targets() const {
  absl::MutexLock lock(&mu_);
  return targets_;
}

void LoopbackProvider::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::string body;
    const std::string target = ReadRequest(fd, &body);
    if (!target.empty()) {
      {
        absl::MutexLock lock(&mu_);
        targets_.push_back(target);
      }
      std::string reply = R"({"id":"tck","object":"chat.completion","choices":[]})";
      if (body.find("tck-no-usage") == std::string::npos) {
        reply = R"({"id":"tck","object":"chat.completion","choices":[],"usage":{"prompt_tokens":)" +
                std::to_string(kInputTokens) + R"(,"completion_tokens":)" +
                std::to_string(kOutputTokens) + "}}";
      }
      WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(reply.size()) + "\r\nConnection: close\r\n\r\n" + reply);
    }
    close(fd);
  }
}

int LoopbackPost(const std::string& url, const std::string& body, std::string* error) {
  const std::string prefix = "http://127.0.0.1:";
  if (url.rfind(prefix, 0) != 0) {
    *error = "not a loopback http URL: " + url;
    return -1;
  }
  const std::string rest = url.substr(prefix.size());
  const size_t slash = rest.find('/');
  const int port = std::atoi(rest.substr(0, slash).c_str());
  const std::string path = slash == std::string::npos ? "/" : rest.substr(slash);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = std::string("connect to ") + url + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  WriteAll(fd, "POST " + path +
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: " +
                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  std::string response;
  char buffer[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  if (response.size() < 12 || response.rfind("HTTP/1.", 0) != 0) {
    *error = "no HTTP response from " + url;
    return -1;
  }
  return std::atoi(response.substr(9, 3).c_str());
}

}  // namespace ktesio::tck
