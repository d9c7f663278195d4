// ktctl top: a live full-screen view of every Agent Instance (docs/top.md). The pure parts (rows,
// rates, layout, keys) are in top_view.h and the terminal, signal and stream adapters in top_io.h;
// this file parses the flags, prints the one-shot and runs the live loop.

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/app.h"
#include "cli/batch.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/top_io.h"
#include "cli/top_view.h"

namespace ktesio::cli {
namespace {

constexpr double kMinLiveInterval = 0.5;
constexpr int64_t kEventRefreshDelayMs = 150;  // lets a burst of transitions settle
constexpr int64_t kMinPollSpacingMs = 500;     // event-driven refreshes never come faster
constexpr int64_t kResubscribeDelayMs = 1000;
// After the stream ends, a daemon that is shutting down gets this long to finish going away, so
// the check-poll reports it as unreachable rather than as a call cancelled mid-shutdown.
constexpr int64_t kStreamEndPollDelayMs = 200;

struct TopOptions {
  std::string selector;
  top::SortKey sort = top::SortKey::kName;
  std::optional<double> interval;  // seconds; default 2 live, 1 one-shot
  bool once = false;
};

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// True when the locale promises UTF-8 output (else the live view uses ASCII stand-ins).
bool Utf8Locale() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') {
      const std::string text = absl::AsciiStrToLower(value);
      return text.find("utf-8") != std::string::npos || text.find("utf8") != std::string::npos;
    }
  }
  return false;
}

absl::StatusOr<TopOptions> ParseOptions(const LocalArgs& args) {
  TopOptions options;
  options.selector = args.Value("--selector").value_or("");
  options.once = args.Has("--once");
  if (std::optional<std::string> sort = args.Value("--sort")) {
    std::optional<top::SortKey> key = top::ParseSortKey(*sort);
    if (!key.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sort is name, state, cpu, mem, restarts, tok/min or spend, got '", *sort, "'"));
    }
    options.sort = *key;
  }
  if (std::optional<std::string> text = args.Value("--interval")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*text, &seconds) || !(seconds >= 0) || seconds > 3600) {
      return absl::InvalidArgumentError(
          absl::StrCat("--interval takes seconds in [0, 3600], got '", *text, "'"));
    }
    options.interval = seconds;
  }
  return options;
}

grpc::Status ListFleet(Client& client, const std::string& selector,
                       v1::ListAgentsResponse* response) {
  v1::ListAgentsRequest request;
  request.set_selector(selector);
  // skip_resources stays false: the view needs AgentInstance.resources.
  auto call = client.NewContext();
  return client.agents().ListAgents(call.get(), request, response);
}

// Not a terminal, --once or --json: two samples `interval` apart (one when it is 0), printed once.
int OneShot(Context& ctx, Client& client, const TopOptions& options) {
  const double interval = options.interval.value_or(1.0);
  top::RateTracker rates(0);
  v1::ListAgentsResponse response;
  for (int sample = 0; sample < (interval > 0 ? 2 : 1); ++sample) {
    if (sample > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(interval * 1e3)));
    }
    grpc::Status status = ListFleet(client, options.selector, &response);
    if (!status.ok()) {
      return ctx.Fail(status);
    }
    rates.Observe(response, SteadyMs());
  }
  std::vector<top::Row> rows = top::BuildRows(response, rates, NowUnixMs());
  top::SortRows(rows, options.sort, false);
  if (ctx.global.json) {
    Out(top::SnapshotJson(rows) + "\n");
    return kExitOk;
  }
  winsize size{};
  const size_t width =
      isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
  std::vector<std::string> lines = top::RenderTable(rows, options.sort, false, width, true);
  lines.push_back(top::Truncate(top::FleetSummary(rows, response.totals(), true),
                                width == 0 ? SIZE_MAX : width, true));
  Out(absl::StrJoin(lines, "\n") + "\n");
  return kExitOk;
}

// The live view: one poll loop on this thread, the event stream on another.
class Session {
 public:
  Session(Client& client, const TopOptions& options, top::Terminal& terminal, top::WakePipe& wake)
      : client_(client),
        terminal_(terminal),
        wake_(wake),
        interval_ms_(static_cast<int64_t>(options.interval.value_or(2.0) * 1000)),
        rates_(std::max<int64_t>(400, interval_ms_ * 9 / 10)),
        utf8_(Utf8Locale()),
        feed_(client, wake.write_fd()) {
    view_.sort = options.sort;
    view_.selector = options.selector;
  }

  // Runs until a quit key or signal (returns the exit code) or a failed call (failure()).
  int Run();
  const std::optional<grpc::Status>& failure() const { return failure_; }

 private:
  void Refresh();
  void FetchDaemonStatus();
  void Wait();
  void OnWake();
  void OnEvents();
  void OnKeys();
  void ApplySelector(const std::string& selector);
  void Draw();
  void Quit(int code) {
    quit_ = true;
    exit_code_ = code;
  }

  Client& client_;
  top::Terminal& terminal_;
  top::WakePipe& wake_;
  int64_t interval_ms_ = 2000;
  top::RateTracker rates_;
  top::ViewState view_;
  bool utf8_ = false;
  v1::ListAgentsResponse list_;
  std::optional<v1::GetStatusResponse> daemon_;
  bool dirty_ = true;
  bool quit_ = false;
  int exit_code_ = kExitOk;
  int64_t last_poll_ms_ = 0;
  int64_t next_poll_ms_ = 0;
  std::optional<int64_t> resubscribe_at_ms_;
  std::optional<uint64_t> last_cursor_;
  std::optional<grpc::Status> failure_;
  top::EventFeed feed_;
};

int Session::Run() {
  // Subscribe before the first poll; a transition that races the subscription is picked up by
  // the next poll at the latest.
  feed_.Start(std::nullopt);
  FetchDaemonStatus();
  while (!quit_ && !failure_.has_value()) {
    const int64_t now = SteadyMs();
    if (now >= next_poll_ms_) {
      Refresh();
      continue;
    }
    if (resubscribe_at_ms_.has_value() && now >= *resubscribe_at_ms_) {
      resubscribe_at_ms_.reset();
      feed_.Stop();
      feed_.Start(last_cursor_);
      FetchDaemonStatus();
    }
    if (dirty_) {
      Draw();
    }
    Wait();
  }
  feed_.Stop();
  return exit_code_;
}

void Session::Refresh() {
  v1::ListAgentsResponse response;
  grpc::Status status = ListFleet(client_, view_.selector, &response);
  last_poll_ms_ = SteadyMs();
  next_poll_ms_ = last_poll_ms_ + interval_ms_;
  if (!status.ok()) {
    failure_ = status;
    return;
  }
  list_ = std::move(response);
  rates_.Observe(list_, last_poll_ms_);
  dirty_ = true;
}

void Session::FetchDaemonStatus() {
  v1::GetStatusResponse status;
  auto call = client_.NewContext();
  if (client_.system().GetStatus(call.get(), v1::GetStatusRequest(), &status).ok()) {
    daemon_ = std::move(status);
  }
}

void Session::Wait() {
  int64_t until = next_poll_ms_;
  if (resubscribe_at_ms_.has_value()) {
    until = std::min(until, *resubscribe_at_ms_);
  }
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_.read_fd(), POLLIN, 0}};
  const int timeout = static_cast<int>(std::clamp<int64_t>(until - SteadyMs(), 0, 60000));
  if (poll(fds, 2, timeout) < 0) {
    if (errno != EINTR) {
      failure_ = grpc::Status(grpc::StatusCode::INTERNAL,
                              absl::StrCat("poll failed: ", std::strerror(errno)));
    }
    return;
  }
  if ((fds[1].revents & POLLIN) != 0) {
    OnWake();
  }
  if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    OnKeys();
  }
}

void Session::OnWake() {
  for (unsigned char byte : wake_.Drain()) {
    if (byte == top::WakePipe::kWakeByte) {
      OnEvents();
    } else if (byte == SIGWINCH) {
      dirty_ = true;
    } else if (byte == SIGINT) {
      Quit(kExitOk);
    } else {
      Quit(128 + byte);  // SIGTERM, SIGHUP: the status a shell reports for that signal
    }
  }
}

void Session::OnEvents() {
  top::EventFeed::Batch batch = feed_.Take();
  bool refresh = false;
  for (const v1::Event& event : batch.events) {
    last_cursor_ = event.cursor();
    if (event.type() == "transition") {
      // Show the new state now; the refresh brings restarts, uptime and new instances.
      dirty_ = top::ApplyTransition(list_, event.instance(), event.payload_json()) || dirty_;
      refresh = true;
    } else if (event.type() == "budget_breach") {
      refresh = true;
    }
  }
  if (refresh) {
    const int64_t soon =
        std::max(SteadyMs() + kEventRefreshDelayMs, last_poll_ms_ + kMinPollSpacingMs);
    next_poll_ms_ = std::min(next_poll_ms_, soon);
  }
  if (batch.ended) {
    // Lagged: resume at once from the last cursor. Otherwise the daemon may be gone: poll now
    // (a failure ends the view) and subscribe again a little later.
    next_poll_ms_ = batch.lagged ? next_poll_ms_ : SteadyMs() + kStreamEndPollDelayMs;
    resubscribe_at_ms_ = SteadyMs() + (batch.lagged ? 0 : kResubscribeDelayMs);
  }
}

void Session::OnKeys() {
  char buffer[256];
  const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
    Quit(kExitOk);  // the terminal went away
    return;
  }
  const size_t height = terminal_.Size().second;
  for (const top::Key& key : top::DecodeKeys(std::string_view(buffer, n < 0 ? 0 : n))) {
    const size_t max_scroll = top::MaxScroll(static_cast<size_t>(list_.instances_size()), height);
    top::KeyResult result = top::ApplyKey(view_, key, top::VisibleRows(height), max_scroll);
    dirty_ = true;
    if (result.action == top::KeyAction::kQuit) {
      Quit(kExitOk);
      return;
    }
    if (result.action == top::KeyAction::kApplySelector) {
      ApplySelector(result.selector);
    }
  }
}

void Session::ApplySelector(const std::string& selector) {
  v1::ListAgentsResponse response;
  grpc::Status status = ListFleet(client_, selector, &response);
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    view_.message = ToCallError(status, client_.socket_path()).message;  // keeps the old one
    return;
  }
  if (!status.ok()) {
    failure_ = status;
    return;
  }
  view_.selector = selector;
  view_.scroll = 0;
  list_ = std::move(response);
  rates_.Observe(list_, SteadyMs());
}

void Session::Draw() {
  const auto [width, height] = terminal_.Size();
  top::FrameInput input;
  input.rows = top::BuildRows(list_, rates_, NowUnixMs());
  top::SortRows(input.rows, view_.sort, view_.reverse);
  input.totals = list_.totals();
  input.title = daemon_.has_value() ? top::DaemonTitle(*daemon_, NowUnixMs(), utf8_)
                                    : absl::StrCat("ktesiod at ", client_.socket_path());
  input.sort = view_.sort;
  input.reverse = view_.reverse;
  input.selector = view_.selector;
  input.status = view_.prompt.has_value()
                     ? absl::StrCat("selector: ", *view_.prompt, "_  (Enter applies, Esc cancels)")
                     : view_.message;
  view_.scroll = std::min(view_.scroll, top::MaxScroll(input.rows.size(), height));
  input.scroll = view_.scroll;
  input.utf8 = utf8_;
  const std::vector<std::string> lines = top::RenderFrame(input, width, height);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t used = top::DisplayWidth(lines[i]);
    const bool bar = i == 2 || i + 1 == lines.size();  // table header and footer
    absl::StrAppend(&out, "\x1b[", i + 1, ";1H", bar ? "\x1b[7m" : "", lines[i],
                    bar ? std::string(width - std::min(width, used), ' ') + "\x1b[0m"
                        : (used < width ? "\x1b[K" : ""));
  }
  if (lines.size() < height) {
    // Only for a frame shorter than the screen: ESC[J at the cursor would erase the last column.
    absl::StrAppend(&out, "\x1b[", lines.size() + 1, ";1H\x1b[J");
  }
  terminal_.Write(out);
  dirty_ = false;
}

int Live(Context& ctx, Client& client, const TopOptions& options) {
  absl::StatusOr<std::unique_ptr<top::WakePipe>> wake = top::WakePipe::Install();
  if (!wake.ok()) {
    return ReportError(ctx.global.json, "INTERNAL", std::string(wake.status().message()),
                       kExitGeneral);
  }
  absl::StatusOr<std::unique_ptr<top::Terminal>> terminal = top::Terminal::Enter();
  if (!terminal.ok()) {
    return ReportError(ctx.global.json, "INTERNAL", std::string(terminal.status().message()),
                       kExitGeneral);
  }
  int code = kExitOk;
  std::optional<grpc::Status> failure;
  {
    Session session(client, options, **terminal, **wake);
    code = session.Run();
    failure = session.failure();
  }                        // the event thread has ended here
  (*terminal)->Restore();  // before any message, so it lands on the normal screen
  return failure.has_value() ? ctx.Fail(*failure) : code;
}

int Top(Context& ctx, const LocalArgs& args) {
  absl::StatusOr<TopOptions> options = ParseOptions(args);
  if (!options.ok()) {
    return ctx.Usage(std::string(options.status().message()));
  }
  const bool live =
      !options->once && !ctx.global.json && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (live && options->interval.value_or(2.0) < kMinLiveInterval) {
    return ctx.Usage("--interval is at least 0.5 seconds for the live view");
  }
  int code = kExitOk;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  return live ? Live(ctx, *client, *options) : OneShot(ctx, *client, *options);
}

}  // namespace

void AddTopCommands(std::vector<Command>& commands) {
  commands.push_back(
      {{"top"},
       "live full-screen view of every agent: state, CPU, memory, tokens, spend",
       {kSelectorArg,
        {.name = "--sort",
         .value = "COL",
         .help = "name, state, cpu, mem, restarts, tok/min or spend (default name)"},
        {.name = "--interval",
         .value = "SECS",
         .help = "stats poll interval (default 2 live, at least 0.5; 1 one-shot)"},
        {.name = "--once", .help = "print one text snapshot and exit (also when not a terminal)"}},
       Top});
}

}  // namespace ktesio::cli
