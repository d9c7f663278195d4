#pragma once

// Turns the agent's raw output bytes into log records. Pure: no I/O, so it is unit-tested
// directly. Any byte sequence is accepted (NUL, invalid UTF-8, no newline at all); the only bytes
// the framer interprets are '\n' (end of line) and a '\r' right before it (dropped).

#include <cstddef>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

namespace ktesio::daemon::shim {

// Longer lines are cut into pieces of this size, each its own record, so one runaway line cannot
// make the shim buffer without bound.
inline constexpr std::size_t kMaxRecordText = 16 * 1024;

// What a record holds: a whole line, or the first or a later piece of a line longer than
// kMaxRecordText.
enum class Piece : unsigned char { kWhole, kFirst, kMore };

// Splits a byte stream into line texts. The sink is called as sink(text, piece): `text` has no
// '\n' and no trailing '\r'. `text` is only valid during the call.
class LineFramer {
 public:
  template <typename Sink>
  void Feed(std::string_view data, Sink&& sink) {
    while (!data.empty()) {
      const void* nl = std::memchr(data.data(), '\n', data.size());
      if (nl == nullptr) {
        Hold(data, sink);
        return;
      }
      std::size_t n = static_cast<const char*>(nl) - data.data();
      if (pending_.empty()) {
        EmitLine(data.substr(0, n), sink);
      } else {
        pending_.append(data.data(), n);
        EmitLine(pending_, sink);
        pending_.clear();
      }
      data.remove_prefix(n + 1);
    }
  }

  // The stream ended: emits an unterminated last line, if any.
  template <typename Sink>
  void Finish(Sink&& sink) {
    if (!pending_.empty()) {
      EmitLine(pending_, sink);
      pending_.clear();
    }
    continued_ = false;
  }

  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  template <typename Sink>
  void EmitLine(std::string_view text, Sink& sink) {
    if (!text.empty() && text.back() == '\r') {
      text.remove_suffix(1);
    }
    Piece piece = continued_ ? Piece::kMore : Piece::kWhole;
    while (text.size() > kMaxRecordText) {
      sink(text.substr(0, kMaxRecordText), piece == Piece::kWhole ? Piece::kFirst : Piece::kMore);
      text.remove_prefix(kMaxRecordText);
      piece = Piece::kMore;
    }
    sink(text, piece);
    continued_ = false;
  }

  // Keeps an unterminated line, emitting full pieces of it early. One spare byte is held back so
  // that a '\r' that turns out to precede '\n' is dropped rather than becoming its own record.
  template <typename Sink>
  void Hold(std::string_view data, Sink& sink) {
    pending_.append(data);
    std::size_t start = 0;
    while (pending_.size() - start > kMaxRecordText + 1) {
      sink(std::string_view(pending_).substr(start, kMaxRecordText),
           continued_ ? Piece::kMore : Piece::kFirst);
      start += kMaxRecordText;
      continued_ = true;
    }
    pending_.erase(0, start);
  }

  std::string pending_;
  bool continued_ = false;  // pending_ continues a line whose first pieces were emitted.
};

// Formats CLOCK_REALTIME as RFC 3339 UTC with milliseconds: "2026-11-30T15:14:26.123Z". Caches the
// broken-down seconds, since a burst formats the same second many times.
class TimestampFormatter {
 public:
  // The result stays valid until the next call.
  std::string_view Format(const timespec& ts);
  std::string_view Now();

 private:
  time_t cached_seconds_ = -1;
  std::size_t prefix_length_ = 0;  // Length of "YYYY-MM-DDTHH:MM:SS." in buffer_.
  char buffer_[64] = {};
};

// True if `text` is a self-reported usage line: "KTESIO_USAGE" after optional spaces and tabs.
bool IsUsageLine(std::string_view text);

// Appends "<timestamp> <stream> <text>\n" to *out.
void AppendRecord(std::string* out, std::string_view timestamp, std::string_view stream,
                  std::string_view text);

}  // namespace ktesio::daemon::shim
