#include "cli/top_io.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ktesio::cli::top {
namespace {

int g_wake_fd = -1;

// Async-signal-safe: one write(2) to a non-blocking pipe, errno preserved.
extern "C" void OnTopSignal(int signo) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signo);
  if (write(g_wake_fd, &byte, 1) < 0) {
    // A full pipe already holds bytes the loop has not read: it will wake.
  }
  errno = saved;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WakePipe>> WakePipe::Install() {
  auto pipe = std::unique_ptr<WakePipe>(new WakePipe());
  if (pipe2(pipe->fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("cannot create a pipe: ", std::strerror(errno)));
  }
  g_wake_fd = pipe->fds_[1];
  struct sigaction action {};
  action.sa_handler = OnTopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < kSignals.size(); ++i) {
    sigaction(kSignals[i], &action, &pipe->saved_[i]);
  }
  return pipe;
}

WakePipe::~WakePipe() {
  for (size_t i = 0; i < kSignals.size(); ++i) {
    sigaction(kSignals[i], &saved_[i], nullptr);
  }
  g_wake_fd = -1;
  for (int fd : fds_) {
    if (fd >= 0) {
      close(fd);
    }
  }
}

std::string WakePipe::Drain() {
  std::string bytes;
  char buffer[64];
  for (ssize_t n; (n = read(fds_[0], buffer, sizeof(buffer))) > 0;) {
    bytes.append(buffer, static_cast<size_t>(n));
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<Terminal>> Terminal::Enter() {
  auto terminal = std::unique_ptr<Terminal>(new Terminal());
  if (tcgetattr(STDIN_FILENO, &terminal->saved_) != 0) {
    return absl::InternalError(absl::StrCat("cannot read the terminal: ", std::strerror(errno)));
  }
  termios raw = terminal->saved_;
  raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL | BRKINT | INPCK | ISTRIP);
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG | IEXTEN);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) {
    return absl::InternalError(absl::StrCat("cannot set raw mode: ", std::strerror(errno)));
  }
  terminal->active_ = true;
  // Alternate screen, hidden cursor, no autowrap (a full-width line must never wrap), clear.
  terminal->Write("\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[2J");
  return terminal;
}

void Terminal::Restore() {
  if (!active_) {
    return;
  }
  active_ = false;
  Write("\x1b[0m\x1b[?7h\x1b[?25h\x1b[?1049l");
  // TCSAFLUSH: keys typed into the view must not reach the shell afterwards.
  tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
}

void Terminal::Write(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::pair<size_t, size_t> Terminal::Size() const {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0) {
    return {80, 24};
  }
  return {size.ws_col, size.ws_row};
}

void EventFeed::Start(std::optional<uint64_t> since_cursor) {
  v1::SubscribeEventsRequest request;
  if (since_cursor.has_value()) {
    request.set_since_cursor(*since_cursor);
  }
  call_ = std::make_unique<grpc::ClientContext>();  // no deadline: the stream is open-ended
  thread_ = std::thread([this, request] { Run(request); });
}

void EventFeed::Stop() {
  if (thread_.joinable()) {
    call_->TryCancel();
    thread_.join();
  }
  absl::MutexLock lock(&mu_);
  pending_ = Batch{};
}

EventFeed::Batch EventFeed::Take() {
  absl::MutexLock lock(&mu_);
  return std::exchange(pending_, Batch{});
}

void EventFeed::Run(const v1::SubscribeEventsRequest& request) {
  std::unique_ptr<grpc::ClientReader<v1::SubscribeEventsResponse>> reader =
      client_.events().SubscribeEvents(call_.get(), request);
  v1::SubscribeEventsResponse response;
  while (reader->Read(&response)) {
    absl::MutexLock lock(&mu_);
    pending_.events.insert(pending_.events.end(), response.events().begin(),
                           response.events().end());
    pending_.lagged = pending_.lagged || response.lagged();
    Wake();
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  pending_.ended = true;
  pending_.status = status;
  Wake();
}

void EventFeed::Wake() {
  const unsigned char byte = WakePipe::kWakeByte;
  if (write(wake_fd_, &byte, 1) < 0) {
    // A full pipe: the loop will wake anyway.
  }
}

}  // namespace ktesio::cli::top
