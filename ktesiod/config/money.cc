#include "config/money.h"

#include <limits>

#include "config/errors.h"

namespace ktesio::daemon::config {

using internal::Cat;
using internal::ConfigInvalid;
using internal::Escape;

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

absl::Status Bad(std::string_view text, std::string_view why) {
  return ConfigInvalid(Cat("invalid dollar amount '", Escape(text), "': ", why,
                           " (write plain decimal dollars with at most 6 fraction digits, "
                           "e.g. 2.5 or 0.000125)"));
}

}  // namespace

absl::StatusOr<std::int64_t> ParseMicroDollars(std::string_view text) {
  if (text.empty()) {
    return Bad(text, "empty");
  }
  if (text.front() == '$') {
    return Bad(text, "no '$' sign");
  }
  if (text.front() == '-' || text.front() == '+') {
    return Bad(text, "no sign allowed");
  }
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  for (std::string_view part : {whole, fraction}) {
    for (char c : part) {
      if (!IsDigit(c)) {
        return Bad(text, c == 'e' || c == 'E' ? "no exponent allowed" : "digits only");
      }
    }
  }
  if (whole.empty()) {
    return Bad(text, "a digit must precede '.'");
  }
  if (dot != std::string_view::npos && fraction.empty()) {
    return Bad(text, "a digit must follow '.'");
  }
  if (fraction.size() > 6) {
    return Bad(text, "more than 6 fraction digits (micro-dollar precision)");
  }
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t dollars = 0;
  for (char c : whole) {
    const int digit = c - '0';
    if (dollars > (kMax - digit) / 10) {
      return Bad(text, "too large");
    }
    dollars = dollars * 10 + digit;
  }
  std::int64_t micros_part = 0;
  for (size_t i = 0; i < 6; ++i) {
    micros_part = micros_part * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  }
  if (dollars > (kMax - micros_part) / kMicrosPerDollar) {
    return Bad(text, "too large");
  }
  return dollars * kMicrosPerDollar + micros_part;
}

std::string FormatMicroDollars(std::int64_t micros) {
  std::string out = std::to_string(micros / kMicrosPerDollar);
  std::int64_t fraction = micros % kMicrosPerDollar;
  if (fraction == 0) {
    return out;
  }
  std::string digits = std::to_string(fraction);
  digits.insert(0, 6 - digits.size(), '0');
  while (digits.back() == '0') {
    digits.pop_back();
  }
  return Cat(out, ".", digits);
}

}  // namespace ktesio::daemon::config
