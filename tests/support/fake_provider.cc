#include "fake_provider.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "gtest/gtest.h"
#include "json.h"

namespace ktesio::testing {

FakeProvider::FakeProvider(const std::string& dir, const std::string& tls_cert,
                           const std::string& tls_key)
    : tls_(!tls_cert.empty()), ledger_(dir + "/provider-ledger.jsonl") {
  int out[2];
  if (pipe(out) != 0) {
    ADD_FAILURE() << "pipe failed";
    return;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<std::string> args = {"/usr/bin/python3", KTESIO_FAKE_PROVIDER, "--ledger", ledger_};
    if (tls_) {
      args.insert(args.end(), {"--tls", tls_cert, tls_key});
    }
    std::vector<char*> argv;
    for (std::string& arg : args) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string line;
  char c = 0;
  while (read(out[0], &c, 1) == 1 && c != '\n') {
    line.push_back(c);
  }
  close(out[0]);
  if (line.rfind("PORT ", 0) != 0) {
    ADD_FAILURE() << "fake provider did not start: '" << line << "'";
    return;
  }
  port_ = static_cast<uint16_t>(std::stoi(line.substr(5)));
}

FakeProvider::~FakeProvider() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string FakeProvider::url() const {
  return (tls_ ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port_);
}

std::vector<FakeProvider::Call> FakeProvider::Calls() const {
  std::vector<Call> calls;
  std::istringstream in(ReadFileOrEmpty(ledger_));
  std::string line;
  while (std::getline(in, line)) {
    std::optional<Json> entry = ParseJson(line);
    if (!entry.has_value()) {
      ADD_FAILURE() << "bad provider ledger line: " << line;
      continue;
    }
    Call call;
    call.path = (*entry)["path"].string;
    call.reported = (*entry)["reported"].boolean;
    if (call.reported) {
      call.input = std::stoull((*entry)["input"].number);
      call.output = std::stoull((*entry)["output"].number);
    }
    call.include_usage = (*entry)["include_usage"].boolean;
    calls.push_back(call);
  }
  return calls;
}

namespace {

bool ReadMore(int fd, std::string& buffer) {
  char chunk[16384];
  ssize_t n = read(fd, chunk, sizeof(chunk));
  if (n <= 0) {
    return false;
  }
  buffer.append(chunk, static_cast<size_t>(n));
  return true;
}

}  // namespace

HttpResponse HttpRequest(uint16_t port, const std::string& method, const std::string& target,
                         const std::string& body, const std::vector<std::string>& headers) {
  HttpResponse response;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    response.error = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return response;
  }
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const std::string& header : headers) {
    request += header + "\r\n";
  }
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "Connection: close\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) {
      break;  // the server may answer (413) before reading everything
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  while (ReadMore(fd, raw)) {
  }
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    response.error = "no response head";
    return response;
  }
  std::istringstream head(raw.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  if (line.size() < 12) {
    response.error = "bad status line";
    return response;
  }
  response.status = std::stoi(line.substr(9, 3));
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    std::string name = line.substr(0, colon);
    for (char& ch : name) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    response.headers[name] = value;
  }
  std::string rest = raw.substr(head_end + 4);
  if (response.headers["transfer-encoding"] == "chunked") {
    size_t at = 0;
    while (true) {
      const size_t eol = rest.find("\r\n", at);
      if (eol == std::string::npos) {
        response.error = "truncated chunked body";
        break;
      }
      const size_t size = std::stoul(rest.substr(at, eol - at), nullptr, 16);
      if (size == 0) {
        break;
      }
      response.body += rest.substr(eol + 2, size);
      at = eol + 2 + size + 2;
    }
  } else {
    response.body = rest;
  }
  return response;
}

bool MakeSelfSignedCert(const std::string& dir) {
  RunResult made =
      RunProcess({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                  dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2", "-subj",
                  "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"});
  return made.exit_code == 0;
}

}  // namespace ktesio::testing
