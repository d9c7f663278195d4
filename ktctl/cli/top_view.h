#pragma once

// The pure core of `ktctl top` (docs/top.md): rows from ListAgents answers and rates from the
// difference between two of them, sorting, the text of one frame for a given terminal size, the
// one-shot JSON document and the decoding of key presses. No I/O, no clock: callers pass times.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ktesio/v1/agent.pb.h"
#include "ktesio/v1/system.pb.h"

namespace ktesio::cli::top {

// Sort columns, in the order the `s` key cycles through them.
enum class SortKey : int { kName, kState, kCpu, kMem, kRestarts, kTokens, kSpend };

// "name", "state", "cpu", "mem", "restarts", "tok/min", "spend".
std::string_view SortKeyName(SortKey key);
// The inverse of SortKeyName (also "tokens" for kTokens); nullopt for anything else.
std::optional<SortKey> ParseSortKey(std::string_view text);
SortKey NextSortKey(SortKey key);

// Per-instance rates, measured between two samples.
struct Rates {
  bool measured = false;  // false until two samples far enough apart were seen
  double cpu_percent = 0;
  double tokens_per_minute = 0;
};

// Remembers each instance's CPU seconds and cumulative tokens at a baseline sample and derives
// rates from the next sample. A baseline is replaced only once `min_window_ms` has passed, so an
// extra poll right after another does not compute a rate over a tiny window. Not thread-safe.
class RateTracker {
 public:
  explicit RateTracker(int64_t min_window_ms) : min_window_ms_(min_window_ms) {}

  // Folds in one ListAgents answer received at `steady_ms` (any monotonic clock, milliseconds).
  void Observe(const v1::ListAgentsResponse& response, int64_t steady_ms);
  // The latest rates of `name` (unmeasured when unknown).
  Rates For(const std::string& name) const;

 private:
  struct Baseline {
    bool has_cpu = false;
    double cpu_seconds = 0;
    uint64_t current_run = 0;
    uint64_t tokens = 0;
    int64_t at_ms = 0;
  };
  int64_t min_window_ms_ = 0;
  std::map<std::string, Baseline> baselines_;
  std::map<std::string, Rates> rates_;
};

// What is left of an instance's budget: the smaller of the per-run and cumulative remainders.
struct BudgetRemaining {
  std::optional<uint64_t> tokens;
  std::optional<int64_t> micro_dollars;
};

// One line of the view.
struct Row {
  std::string name;
  v1::AgentState state = v1::AGENT_STATE_UNSPECIFIED;
  std::string cause;                      // the full cause of the last transition
  std::optional<int64_t> uptime_seconds;  // live instances with a start time
  uint32_t restarts = 0;
  bool has_resources = false;  // the daemon sampled the process tree
  uint64_t resident_memory_bytes = 0;
  Rates rates;
  std::optional<int64_t> micro_dollars;  // cumulative spend, with a full Rate
  std::optional<BudgetRemaining> budget;
};

// Rows in the answer's order. `now_unix_ms` (the client's wall clock) measures uptimes.
std::vector<Row> BuildRows(const v1::ListAgentsResponse& response, const RateTracker& rates,
                           int64_t now_unix_ms);

// Sorts by `key`: name ascending, state by urgency (failed first), numbers largest first; ties
// by name. `reverse` flips the whole order.
void SortRows(std::vector<Row>& rows, SortKey key, bool reverse);

// Applies a `transition` event's payload (docs/events.md) to the cached answer. Returns false
// when the payload is unreadable or names an instance the answer does not hold.
bool ApplyTransition(v1::ListAgentsResponse& response, const std::string& instance,
                     std::string_view payload_json);

// The cause without its `{detail}` part: "crashed{exit code 3}" -> "crashed".
std::string ShortCause(std::string_view cause);
// "512B", "12K", "12.3M", "1.5G".
std::string FormatBytes(uint64_t bytes);
// "0", "950", "1.2k", "12k", "3.4M".
std::string FormatCount(double value);
// "45s", "4m10s", "2h05m", "3d04h".
std::string FormatUptime(int64_t seconds);
// "$0.12", "$1234.56".
std::string FormatSpend(int64_t micro_dollars);

// Everything one frame shows besides the rows.
struct FrameInput {
  std::vector<Row> rows;  // already sorted
  v1::FleetTotals totals;
  std::string title;  // the daemon line, e.g. from DaemonTitle()
  SortKey sort = SortKey::kName;
  bool reverse = false;
  std::string selector;
  std::string status;  // replaces the key help in the footer when not empty
  size_t scroll = 0;   // index of the first row shown (clamped)
  bool utf8 = true;    // else ASCII stand-ins for "…", "—", "▲", "▼"
};

// The daemon line: "ktesiod 1.2.0 pid 42 up 3h05m · linux · /run/ktesio/ktesiod.sock".
std::string DaemonTitle(const v1::GetStatusResponse& status, int64_t now_unix_ms, bool utf8);

// The table header and one line per row, each at most `width` display columns (0 = as wide as
// the content). Narrow widths shorten headers, shrink NAME and STATE (truncating with "…") and
// then drop the least important columns.
std::vector<std::string> RenderTable(const std::vector<Row>& rows, SortKey sort, bool reverse,
                                     size_t width, bool utf8);

// Exactly `height` lines (fewer only when height < 4), none wider than `width`: title, fleet
// summary, table header, as many rows as fit from `scroll`, footer.
std::vector<std::string> RenderFrame(const FrameInput& input, size_t width, size_t height);

// Rows that fit below the header lines of a `height`-line frame, and the largest useful scroll.
size_t VisibleRows(size_t height);
size_t MaxScroll(size_t row_count, size_t height);

// The fleet summary line: "3 agents: 2 running, 1 failed · CPU 12.5% · MEM 40.0M · ...".
std::string FleetSummary(const std::vector<Row>& rows, const v1::FleetTotals& totals, bool utf8);

// {"schema_version":1,"instances":[...]} (docs/top.md).
std::string SnapshotJson(const std::vector<Row>& rows);

// Number of display columns of UTF-8 `text` (one per code point).
size_t DisplayWidth(std::string_view text);
// `text` cut to `width` display columns, ending in "…" (or "~") when it was cut.
std::string Truncate(std::string_view text, size_t width, bool utf8);

// Key presses decoded from bytes read in raw mode.
enum class KeyKind {
  kChar,
  kEnter,
  kEscape,
  kBackspace,
  kCtrlC,
  kCtrlU,
  kUp,
  kDown,
  kPageUp,
  kPageDown,
  kHome,
  kEnd,
  kOther
};
struct Key {
  KeyKind kind = KeyKind::kOther;
  std::string text;  // the UTF-8 character for kChar
};
std::vector<Key> DecodeKeys(std::string_view bytes);

// What the keys change in the live view.
struct ViewState {
  SortKey sort = SortKey::kName;
  bool reverse = false;
  std::string selector;               // the one in force
  std::optional<std::string> prompt;  // the selector being typed after `/` or `f`
  std::string message;                // shown in the footer until the next key
  size_t scroll = 0;
};

enum class KeyAction { kNone, kQuit, kApplySelector };
struct KeyResult {
  KeyAction action = KeyAction::kNone;
  std::string selector;  // for kApplySelector: the typed text (the prompt is closed)
};

// Applies one key (docs/top.md#keys). `page` is the number of visible rows and `max_scroll`
// the largest useful scroll. Ctrl-C quits in every mode; q quits only outside the prompt.
KeyResult ApplyKey(ViewState& state, const Key& key, size_t page, size_t max_scroll);

}  // namespace ktesio::cli::top
