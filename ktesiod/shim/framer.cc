#include "framer.h"

#include <cstdint>
#include <cstdio>

namespace ktesio::daemon::shim {
namespace {

struct CivilDate {
  std::int64_t year;
  int month;  // 1-12
  int day;    // 1-31
};

// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days). Done by
// hand because gmtime_r initialises glibc's time-zone state, which may read /etc/localtime: work
// and memory a UTC-only formatter does not need.
CivilDate CivilFromDays(std::int64_t days) {
  days += 719468;
  std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  std::int64_t doe = days - era * 146097;
  std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  std::int64_t mp = (5 * doy + 2) / 153;
  int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {yoe + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

}  // namespace

std::string_view TimestampFormatter::Format(const timespec& ts) {
  if (ts.tv_sec != cached_seconds_) {
    std::int64_t seconds = ts.tv_sec;
    std::int64_t days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400;
    std::int64_t in_day = seconds - days * 86400;
    CivilDate date = CivilFromDays(days);
    int n = std::snprintf(buffer_, sizeof(buffer_), "%04lld-%02d-%02dT%02d:%02d:%02d.",
                          static_cast<long long>(date.year), date.month, date.day,
                          static_cast<int>(in_day / 3600), static_cast<int>(in_day / 60 % 60),
                          static_cast<int>(in_day % 60));
    // The buffer fits any 64-bit year; the clamp only guards the arithmetic below.
    prefix_length_ = n > 0 && static_cast<std::size_t>(n) < sizeof(buffer_) - 5
                         ? static_cast<std::size_t>(n)
                         : 0;
    cached_seconds_ = ts.tv_sec;
  }
  long ms = ts.tv_nsec / 1000000;
  char* p = buffer_ + prefix_length_;
  p[0] = static_cast<char>('0' + ms / 100);
  p[1] = static_cast<char>('0' + ms / 10 % 10);
  p[2] = static_cast<char>('0' + ms % 10);
  p[3] = 'Z';
  return std::string_view(buffer_, prefix_length_ + 4);
}

std::string_view TimestampFormatter::Now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return Format(ts);
}

bool IsUsageLine(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
    ++i;
  }
  return text.substr(i).starts_with("KTESIO_USAGE");
}

void AppendRecord(std::string* out, std::string_view timestamp, std::string_view stream,
                  std::string_view text) {
  std::size_t old_size = out->size();
  std::size_t size = old_size + timestamp.size() + stream.size() + text.size() + 3;
  // resize + memcpy instead of five appends: this is the hot loop of a burst.
  out->resize(size);
  char* p = out->data() + old_size;
  std::memcpy(p, timestamp.data(), timestamp.size());
  p += timestamp.size();
  *p++ = ' ';
  std::memcpy(p, stream.data(), stream.size());
  p += stream.size();
  *p++ = ' ';
  if (!text.empty()) {
    std::memcpy(p, text.data(), text.size());
    p += text.size();
  }
  *p = '\n';
}

}  // namespace ktesio::daemon::shim
