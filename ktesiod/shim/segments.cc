#include "segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace ktesio::daemon::shim {
namespace {

constexpr std::string_view kPrefix = "output-";
constexpr std::string_view kSuffix = ".log";
constexpr int kRotateRetryMs = 100;

}  // namespace

std::string SegmentFileName(std::uint64_t sequence) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "output-%08llu.log",
                static_cast<unsigned long long>(sequence));
  return buffer;
}

std::optional<std::uint64_t> ParseSegmentFileName(std::string_view name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(kPrefix.size());
  digits.remove_suffix(kSuffix.size());
  if (digits.size() < 8 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || value == 0) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::uint64_t> ListSegments(const std::string& dir) {
  std::vector<std::uint64_t> result;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return result;
  }
  while (dirent* entry = readdir(d)) {
    if (std::optional<std::uint64_t> seq = ParseSegmentFileName(entry->d_name)) {
      result.push_back(*seq);
    }
  }
  closedir(d);
  std::sort(result.begin(), result.end());
  return result;
}

std::vector<std::uint64_t> SegmentsToDelete(std::vector<std::uint64_t> existing,
                                            std::uint64_t current, int keep) {
  std::erase_if(existing, [current](std::uint64_t s) { return s >= current; });
  std::sort(existing.begin(), existing.end());
  std::size_t retained = static_cast<std::size_t>(std::max(keep, 0));
  if (existing.size() <= retained) {
    return {};
  }
  existing.resize(existing.size() - retained);
  return existing;
}

std::size_t SplitPoint(std::string_view records, std::uint64_t size, std::uint64_t max_bytes) {
  if (size >= max_bytes) {
    return 0;
  }
  std::uint64_t room = max_bytes - size;
  if (records.size() <= room) {
    return records.size();
  }
  std::size_t end = records.find('\n', static_cast<std::size_t>(room) - 1);
  return end == std::string_view::npos ? records.size() : end + 1;
}

SegmentLog::SegmentLog(std::string dir, std::uint64_t max_bytes, int keep)
    : dir_(std::move(dir)), max_bytes_(max_bytes), keep_(keep) {}

SegmentLog::~SegmentLog() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

bool SegmentLog::Open(std::string* error) {
  std::vector<std::uint64_t> existing = ListSegments(dir_);
  std::uint64_t sequence = existing.empty() ? 1 : existing.back();
  int fd = OpenSegment(sequence, error);
  if (fd < 0) {
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *error = ErrnoMessage("fstat " + SegmentFileName(sequence), errno);
    close(fd);
    return false;
  }
  fd_ = fd;
  sequence_ = sequence;
  size_ = static_cast<std::uint64_t>(st.st_size);
  Prune();
  return true;
}

bool SegmentLog::Append(std::string_view records, const GiveUpAt& give_up_at) {
  while (!records.empty()) {
    if (size_ >= max_bytes_ && !Rotate(give_up_at)) {
      // Could not create the next segment in time: keep the output in the current one rather
      // than lose it; the next append tries to rotate again.
      size_ = 0;
    }
    std::size_t n = SplitPoint(records, size_, max_bytes_);
    std::string_view piece = records.substr(0, n);
    if (!WriteFully(fd_, piece, SegmentFileName(sequence_), give_up_at)) {
      return false;
    }
    size_ += piece.size();
    records.remove_prefix(piece.size());
  }
  return true;
}

int SegmentLog::OpenSegment(std::uint64_t sequence, std::string* error) const {
  std::string path = dir_ + "/" + SegmentFileName(sequence);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = ErrnoMessage("open " + path, errno);
  }
  return fd;
}

bool SegmentLog::Rotate(const GiveUpAt& give_up_at) {
  std::string error;
  int fd = OpenSegment(sequence_ + 1, &error);
  while (fd < 0) {
    Report(error + " (retrying)");
    if (Clock::now() >= give_up_at()) {
      return false;
    }
    SleepMs(kRotateRetryMs);
    fd = OpenSegment(sequence_ + 1, &error);
  }
  close(fd_);
  fd_ = fd;
  ++sequence_;
  struct stat st {};
  size_ = fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  Prune();
  return true;
}

void SegmentLog::Prune() const {
  for (std::uint64_t seq : SegmentsToDelete(ListSegments(dir_), sequence_, keep_)) {
    std::string path = dir_ + "/" + SegmentFileName(seq);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      Report(ErrnoMessage("unlink " + path, errno));
    }
  }
}

}  // namespace ktesio::daemon::shim
