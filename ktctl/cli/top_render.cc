// The text half of top_view.h: column layout for a terminal width, frames and key decoding.

#include <algorithm>
#include <array>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/render.h"
#include "cli/top_view.h"

namespace ktesio::cli::top {
namespace {

constexpr size_t kColumns = 9;
constexpr size_t kName = 0;
constexpr size_t kState = 1;
constexpr std::array<std::string_view, kColumns> kLongHeaders = {
    "NAME", "STATE", "UPTIME", "RESTARTS", "CPU%", "MEM", "TOK/MIN", "SPEND", "BUDGET"};
constexpr std::array<std::string_view, kColumns> kShortHeaders = {
    "NAME", "STATE", "UP", "RST", "CPU%", "MEM", "TOK/M", "SPEND", "BUDG"};
// Least important first: dropped in this order when even short headers do not fit.
constexpr std::array<size_t, 7> kDropOrder = {8, 7, 2, 6, 3, 5, 4};
constexpr size_t kMinFlex = 8;  // NAME and STATE keep at least this much before columns go

size_t SortColumn(SortKey key) {
  constexpr std::array<size_t, 7> kColumnOf = {0, 1, 4, 5, 3, 6, 7};
  return kColumnOf[static_cast<size_t>(key)];
}

std::string Dash(bool utf8) { return utf8 ? "—" : "-"; }

std::vector<std::string> Cells(const Row& row, bool utf8) {
  const std::string dash = Dash(utf8);
  std::string cause = ShortCause(row.cause);
  if (cause == StateName(row.state)) {
    cause.clear();  // "registered (registered)" says nothing twice
  }
  std::string budget = dash;
  if (row.budget.has_value() && row.budget->tokens.has_value()) {
    budget = FormatCount(static_cast<double>(*row.budget->tokens));
  } else if (row.budget.has_value() && row.budget->micro_dollars.has_value()) {
    budget = FormatSpend(*row.budget->micro_dollars);
  }
  return {
      row.name,
      cause.empty() ? StateName(row.state) : absl::StrCat(StateName(row.state), " (", cause, ")"),
      row.uptime_seconds.has_value() ? FormatUptime(*row.uptime_seconds) : dash,
      absl::StrCat(row.restarts),
      row.has_resources && row.rates.measured ? absl::StrFormat("%.1f", row.rates.cpu_percent)
                                              : dash,
      row.has_resources ? FormatBytes(row.resident_memory_bytes) : dash,
      row.rates.measured ? FormatCount(row.rates.tokens_per_minute) : dash,
      row.micro_dollars.has_value() ? FormatSpend(*row.micro_dollars) : dash,
      budget};
}

struct Plan {
  std::vector<size_t> shown;  // column indexes, left to right
  std::array<std::string, kColumns> headers;
  std::array<size_t, kColumns> widths{};
  size_t gap = 2;
};

Plan Natural(const std::vector<std::vector<std::string>>& cells, SortKey sort, bool reverse,
             bool utf8, bool short_headers) {
  Plan plan;
  const bool ascending = (sort == SortKey::kName || sort == SortKey::kState) != reverse;
  for (size_t c = 0; c < kColumns; ++c) {
    plan.shown.push_back(c);
    plan.headers[c] = std::string(short_headers ? kShortHeaders[c] : kLongHeaders[c]);
    if (c == SortColumn(sort)) {
      plan.headers[c] += utf8 ? (ascending ? "▲" : "▼") : (ascending ? "^" : "v");
    }
    plan.widths[c] = DisplayWidth(plan.headers[c]);
    for (const auto& row : cells) {
      plan.widths[c] = std::max(plan.widths[c], DisplayWidth(row[c]));
    }
  }
  return plan;
}

// Display columns taken by everything but NAME and STATE, gaps included.
size_t FixedWidth(const Plan& plan) {
  size_t total = plan.gap * (plan.shown.size() - 1);
  for (size_t c : plan.shown) {
    total += (c == kName || c == kState) ? 0 : plan.widths[c];
  }
  return total;
}

Plan Fit(const std::vector<std::vector<std::string>>& cells, SortKey sort, bool reverse,
         size_t width, bool utf8) {
  for (bool short_headers : {false, true}) {
    Plan plan = Natural(cells, sort, reverse, utf8, short_headers);
    for (size_t gap : {size_t{2}, size_t{1}}) {
      plan.gap = gap;
      if (width == 0 || FixedWidth(plan) + plan.widths[kName] + plan.widths[kState] <= width) {
        return plan;
      }
    }
  }
  Plan plan = Natural(cells, sort, reverse, utf8, true);
  plan.gap = 1;
  for (size_t drop : kDropOrder) {
    if (FixedWidth(plan) + 2 * kMinFlex <= width) {
      break;
    }
    plan.shown.erase(std::find(plan.shown.begin(), plan.shown.end(), drop));
  }
  const size_t fixed = FixedWidth(plan);
  const size_t avail = width > fixed ? width - fixed : 0;
  // NAME gets a little more than half, STATE the rest, neither more than it needs.
  size_t name = std::min(plan.widths[kName], std::max(kMinFlex, avail * 55 / 100));
  name = std::min(name, avail);
  if (avail - name > plan.widths[kState]) {
    name = std::min(plan.widths[kName], avail - plan.widths[kState]);
  }
  plan.widths[kName] = name;
  plan.widths[kState] = avail - name;
  return plan;
}

std::string Line(const std::vector<std::string>& cells, const Plan& plan, bool utf8) {
  std::string line;
  for (size_t i = 0; i < plan.shown.size(); ++i) {
    const size_t c = plan.shown[i];
    const std::string cell = Truncate(cells[c], plan.widths[c], utf8);
    const std::string pad(plan.widths[c] - DisplayWidth(cell), ' ');
    const bool left = c == kName || c == kState;
    absl::StrAppend(&line, i == 0 ? "" : std::string(plan.gap, ' '),
                    left ? cell + pad : pad + cell);
  }
  while (!line.empty() && line.back() == ' ') {
    line.pop_back();
  }
  return line;
}

std::string Footer(const FrameInput& input, size_t rows_shown, size_t width) {
  const bool ascending =
      (input.sort == SortKey::kName || input.sort == SortKey::kState) != input.reverse;
  std::string right =
      absl::StrCat("sort:", std::string(SortKeyName(input.sort)),
                   input.utf8 ? (ascending ? "▲" : "▼") : (ascending ? "^" : "v"),
                   input.selector.empty() ? "" : absl::StrCat("  sel:", input.selector));
  if (rows_shown < input.rows.size()) {
    const size_t first = std::min(input.scroll, input.rows.size());
    absl::StrAppend(&right, "  ", first + 1, "-", first + rows_shown, "/", input.rows.size());
  }
  if (!input.status.empty()) {
    return Truncate(input.status, width, input.utf8);
  }
  const std::string arrows = input.utf8 ? "↑↓" : "up/down";
  for (const std::string& help :
       {absl::StrCat("q quit  s sort  r reverse  / filter  ", arrows, " PgUp PgDn scroll"),
        std::string("q quit  s sort  r rev  / filter"), std::string("q quit")}) {
    const size_t used = DisplayWidth(help) + DisplayWidth(right);
    if (width == 0 || used + 2 <= width) {
      return help + std::string(width == 0 ? 2 : width - used, ' ') + right;
    }
  }
  return Truncate(right, width, input.utf8);
}

}  // namespace

size_t DisplayWidth(std::string_view text) {
  size_t width = 0;
  for (unsigned char c : text) {
    width += (c & 0xc0) != 0x80 ? 1 : 0;
  }
  return width;
}

std::string Truncate(std::string_view text, size_t width, bool utf8) {
  if (DisplayWidth(text) <= width) {
    return std::string(text);
  }
  if (width == 0) {
    return "";
  }
  std::string out;
  size_t kept = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xc0) != 0x80 && kept++ == width - 1) {
      break;
    }
    out += text[i];
  }
  return out + (utf8 ? "…" : "~");
}

std::vector<std::string> RenderTable(const std::vector<Row>& rows, SortKey sort, bool reverse,
                                     size_t width, bool utf8) {
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size());
  for (const Row& row : rows) {
    cells.push_back(Cells(row, utf8));
  }
  const Plan plan = Fit(cells, sort, reverse, width, utf8);
  std::vector<std::string> lines;
  lines.push_back(
      Line(std::vector<std::string>(plan.headers.begin(), plan.headers.end()), plan, utf8));
  for (const auto& row : cells) {
    lines.push_back(Line(row, plan, utf8));
  }
  if (width != 0) {
    for (std::string& line : lines) {
      line = Truncate(line, width, utf8);  // a guard: the plan already fits
    }
  }
  return lines;
}

size_t VisibleRows(size_t height) { return height > 4 ? height - 4 : 0; }

size_t MaxScroll(size_t row_count, size_t height) {
  const size_t visible = VisibleRows(height);
  return row_count > visible ? row_count - visible : 0;
}

std::vector<std::string> RenderFrame(const FrameInput& input, size_t width, size_t height) {
  const size_t visible = VisibleRows(height);
  const size_t first = std::min(input.scroll, MaxScroll(input.rows.size(), height));
  const size_t count = std::min(visible, input.rows.size() - std::min(first, input.rows.size()));
  // Lay out over every row, not only the visible ones, so columns do not jump while scrolling.
  std::vector<std::string> table =
      RenderTable(input.rows, input.sort, input.reverse, width, input.utf8);
  std::vector<std::string> frame = {
      Truncate(input.title, width, input.utf8),
      Truncate(FleetSummary(input.rows, input.totals, input.utf8), width, input.utf8), table[0]};
  for (size_t i = 0; i < count; ++i) {
    frame.push_back(table[first + 1 + i]);
  }
  if (input.rows.empty()) {
    frame.push_back(
        Truncate(input.selector.empty() ? "no agents registered" : "no agents match the selector",
                 width, input.utf8));
  }
  while (height > 0 && frame.size() + 1 < height) {
    frame.emplace_back();
  }
  FrameInput shown = input;
  shown.scroll = first;
  frame.push_back(Footer(shown, count, width));
  if (frame.size() > height) {
    frame.resize(height);  // a terminal smaller than the header lines
  }
  return frame;
}

namespace {

// Decodes the CSI/SS3 sequence starting at bytes[i] ("\x1b[" or "\x1bO"); advances i past it.
Key Sequence(std::string_view bytes, size_t& i) {
  size_t j = i + 2;
  std::string params;
  while (j < bytes.size() && (bytes[j] < 0x40 || bytes[j] > 0x7e)) {
    params += bytes[j++];
  }
  const char final_byte = j < bytes.size() ? bytes[j] : '\0';
  i = std::min(j, bytes.size() - 1);
  switch (final_byte) {
    case 'A':
      return {KeyKind::kUp, ""};
    case 'B':
      return {KeyKind::kDown, ""};
    case 'H':
      return {KeyKind::kHome, ""};
    case 'F':
      return {KeyKind::kEnd, ""};
    case '~':
      if (params == "5") {
        return {KeyKind::kPageUp, ""};
      }
      if (params == "6") {
        return {KeyKind::kPageDown, ""};
      }
      if (params == "1" || params == "7") {
        return {KeyKind::kHome, ""};
      }
      return {params == "4" || params == "8" ? KeyKind::kEnd : KeyKind::kOther, ""};
    default:
      return {KeyKind::kOther, ""};
  }
}

Key Control(unsigned char c) {
  switch (c) {
    case '\r':
    case '\n':
      return {KeyKind::kEnter, ""};
    case 0x7f:
    case 0x08:
      return {KeyKind::kBackspace, ""};
    case 0x03:
      return {KeyKind::kCtrlC, ""};
    case 0x15:
      return {KeyKind::kCtrlU, ""};
    default:
      return {KeyKind::kOther, ""};
  }
}

}  // namespace

std::vector<Key> DecodeKeys(std::string_view bytes) {
  std::vector<Key> keys;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0x1b) {
      const bool csi = i + 1 < bytes.size() && (bytes[i + 1] == '[' || bytes[i + 1] == 'O');
      keys.push_back(csi ? Sequence(bytes, i) : Key{KeyKind::kEscape, ""});
    } else if (c < 0x20 || c == 0x7f) {
      keys.push_back(Control(c));
    } else {
      size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      len = std::min(len, bytes.size() - i);
      keys.push_back({KeyKind::kChar, std::string(bytes.substr(i, len))});
      i += len - 1;
    }
  }
  return keys;
}

namespace {

KeyResult PromptKey(ViewState& state, const Key& key) {
  std::string& text = *state.prompt;
  switch (key.kind) {
    case KeyKind::kEnter: {
      KeyResult result{KeyAction::kApplySelector, std::move(text)};
      state.prompt.reset();
      return result;
    }
    case KeyKind::kEscape:
      state.prompt.reset();
      break;
    case KeyKind::kBackspace:
      while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xc0) == 0x80) {
        text.pop_back();  // continuation bytes of a multi-byte character
      }
      if (!text.empty()) {
        text.pop_back();
      }
      break;
    case KeyKind::kCtrlU:
      text.clear();
      break;
    case KeyKind::kChar:
      text += key.text;
      break;
    default:
      break;
  }
  return {};
}

size_t Scrolled(size_t scroll, int64_t delta, size_t max_scroll) {
  const int64_t moved = static_cast<int64_t>(std::min(scroll, max_scroll)) + delta;
  return static_cast<size_t>(std::clamp<int64_t>(moved, 0, static_cast<int64_t>(max_scroll)));
}

}  // namespace

KeyResult ApplyKey(ViewState& state, const Key& key, size_t page, size_t max_scroll) {
  if (key.kind == KeyKind::kCtrlC) {
    return {KeyAction::kQuit, ""};
  }
  if (state.prompt.has_value()) {
    return PromptKey(state, key);
  }
  state.message.clear();
  const auto step = static_cast<int64_t>(std::max<size_t>(page, 1));
  const auto all = static_cast<int64_t>(max_scroll) + 1;
  const std::map<KeyKind, int64_t> moves = {{KeyKind::kUp, -1},        {KeyKind::kDown, 1},
                                            {KeyKind::kPageUp, -step}, {KeyKind::kPageDown, step},
                                            {KeyKind::kHome, -all},    {KeyKind::kEnd, all}};
  if (auto move = moves.find(key.kind); move != moves.end()) {
    state.scroll = Scrolled(state.scroll, move->second, max_scroll);
  } else if (key.kind != KeyKind::kChar) {
    return {};
  } else if (key.text == "q" || key.text == "Q") {
    return {KeyAction::kQuit, ""};
  } else if (key.text == "s") {
    state.sort = NextSortKey(state.sort);
  } else if (key.text == "r") {
    state.reverse = !state.reverse;
  } else if (key.text == "/" || key.text == "f") {
    state.prompt = state.selector;
  }
  return {};
}

}  // namespace ktesio::cli::top
