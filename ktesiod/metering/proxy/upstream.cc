#include "metering/proxy/upstream.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ktesio/contract/error.h"

namespace ktesio::daemon::metering {

std::string Upstream::TargetFor(std::string_view client_target) const {
  std::string target;
  AppendTargetFor(client_target, target);
  return target;
}

void Upstream::AppendTargetFor(std::string_view client_target, std::string& out) const {
  out.append(base_path);
  if (client_target.empty() || client_target.front() != '/') {
    out.push_back('/');
  }
  out.append(client_target);
  if (!base_query.empty()) {
    out.push_back(client_target.find('?') == std::string_view::npos ? '?' : '&');
    out.append(base_query);
  }
}

absl::StatusOr<Upstream> ParseUpstream(std::string_view key, std::string_view url) {
  auto bad = [&](std::string_view why) {
    return contract::MakeError(
        absl::StatusCode::kInvalidArgument, contract::reason::kConfigInvalid,
        absl::StrCat("'", std::string(key), "' is not a usable upstream: ", std::string(why)));
  };
  if (url.empty()) {
    return bad("it is not set");
  }
  for (char c : url) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f) {
      return bad("whitespace, control and non-ASCII characters are not allowed");
    }
  }
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return bad("the scheme must be http or https");
  }
  std::string scheme(url.substr(0, sep));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](char c) { return static_cast<char>(std::tolower(c)); });
  Upstream upstream;
  if (scheme == "https") {
    upstream.tls = true;
  } else if (scheme != "http") {
    return bad("the scheme must be http or https");
  }
  if (url.find('#') != std::string_view::npos) {
    return bad("a fragment ('#') is not allowed");
  }
  std::string_view rest = url.substr(sep + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  rest.remove_prefix(authority.size());
  if (authority.find('@') != std::string_view::npos) {
    return bad("credentials in the URL are not allowed (deliver the key as a secret instead)");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return bad("an IPv6 address is missing its closing ']'");
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return bad("unexpected text after the IPv6 address");
      }
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) {
    return bad("the host is missing");
  }
  uint32_t port_number = upstream.tls ? 443 : 80;
  if (!port.empty() || authority.back() == ':') {
    if (!absl::SimpleAtoi(std::string(port), &port_number) || port_number == 0 ||
        port_number > 65535 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("the port must be a number from 1 to 65535");
    }
  }
  upstream.host = std::string(host);
  upstream.port = std::to_string(port_number);
  upstream.host_header = std::string(authority);
  std::string_view path = rest.substr(0, rest.find('?'));
  if (rest.size() > path.size()) {
    upstream.base_query = std::string(rest.substr(path.size() + 1));
  }
  while (!path.empty() && path.back() == '/') {
    path.remove_suffix(1);
  }
  upstream.base_path = std::string(path);
  return upstream;
}

}  // namespace ktesio::daemon::metering
