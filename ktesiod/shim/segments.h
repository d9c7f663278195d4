#pragma once

// The log as numbered segment files: <log-dir>/output-<8-digit sequence>.log. Segments are never
// renamed, so a reader that tracks (sequence, offset) never sees a file change identity; rotation
// only creates the next number and deletes the oldest ones.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io.h"

namespace ktesio::daemon::shim {

// "output-00000001.log". Sequences past 99999999 simply get more digits.
std::string SegmentFileName(std::uint64_t sequence);

// The sequence of a segment file name, or nullopt for any other name.
std::optional<std::uint64_t> ParseSegmentFileName(std::string_view name);

// Sequences of the segments in `dir`, ascending; empty if there are none or `dir` is unreadable.
std::vector<std::uint64_t> ListSegments(const std::string& dir);

// The rotated segments (those below `current`) to delete so that at most `keep` of them remain;
// the newest are kept.
std::vector<std::uint64_t> SegmentsToDelete(std::vector<std::uint64_t> existing,
                                            std::uint64_t current, int keep);

// How many bytes of `records` (whole '\n'-terminated records) go into a segment that already
// holds `size` bytes before it must rotate at `max_bytes`: all records up to and including the
// one that reaches `max_bytes`, so a segment overshoots by less than one record. 0 when the
// segment is already full.
std::size_t SplitPoint(std::string_view records, std::uint64_t size, std::uint64_t max_bytes);

// Appends records to the current segment, rotating and pruning as it goes. Holds only the current
// segment open.
class SegmentLog {
 public:
  SegmentLog(std::string dir, std::uint64_t max_bytes, int keep);
  ~SegmentLog();
  SegmentLog(const SegmentLog&) = delete;
  SegmentLog& operator=(const SegmentLog&) = delete;

  // Continues the highest-numbered segment (creating output-00000001.log if none exists) and
  // prunes segments beyond the retention limit.
  bool Open(std::string* error);

  // Appends whole records. Write failures are retried (backpressure); false only if
  // the time from `give_up_at` passed with bytes unwritten.
  bool Append(std::string_view records, const GiveUpAt& give_up_at);

  std::uint64_t sequence() const { return sequence_; }
  std::uint64_t size() const { return size_; }

 private:
  int OpenSegment(std::uint64_t sequence, std::string* error) const;
  bool Rotate(const GiveUpAt& give_up_at);
  void Prune() const;

  std::string dir_;
  std::uint64_t max_bytes_;
  int keep_;
  int fd_ = -1;
  std::uint64_t sequence_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace ktesio::daemon::shim
