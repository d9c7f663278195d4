#include "metering/proxy/http_message.h"

#include "absl/strings/str_cat.h"

namespace ktesio::daemon::metering {

// Hop-by-hop headers (RFC 9110 §7.6.1) plus the ones the proxy re-frames or rewrites itself.
bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_listed) {
  static constexpr std::string_view kNames[] = {
      "connection",        "keep-alive",        "proxy-connection", "te",
      "trailer",           "transfer-encoding", "upgrade",          "proxy-authorization",
      "proxy-authenticate"};
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (std::string_view hop : kNames) {
    if (lower == hop) {
      return true;
    }
  }
  for (const std::string& listed : connection_listed) {
    if (lower == listed) {
      return true;
    }
  }
  return false;
}

std::string FixedResponse(unsigned status, std::string_view reason, std::string_view body,
                          bool keep_alive) {
  return absl::StrCat("HTTP/1.1 ", status, " ", std::string(reason),
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n", std::string(body));
}

ResponseFraming ChooseFraming(unsigned status, bool head_request, bool has_length, bool rewritten,
                              int client_version, bool& keep_alive) {
  if (head_request || status / 100 == 1 || status == 204 || status == 304) {
    return ResponseFraming::kNoBody;
  }
  if (has_length && !rewritten) {
    return ResponseFraming::kContentLength;
  }
  if (client_version >= 11) {
    return ResponseFraming::kChunked;
  }
  keep_alive = false;
  return ResponseFraming::kCloseDelimited;
}

std::string ResponseHead(const http::response_header<>& response, ResponseFraming framing,
                         std::uint64_t content_length, bool keep_alive) {
  const unsigned status = response.result_int();
  const boost::beast::string_view reason =
      response.reason().empty() ? http::obsolete_reason(response.result()) : response.reason();
  std::string head =
      absl::StrCat("HTTP/1.1 ", status, " ", std::string(reason.data(), reason.size()), "\r\n");
  const std::vector<std::string> listed = ConnectionListed(response);
  for (const auto& field : response) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    if (IsHopByHop(name, listed) || field.name() == http::field::content_length) {
      continue;
    }
    absl::StrAppend(&head, std::string(name), ": ",
                    std::string(field.value().data(), field.value().size()), "\r\n");
  }
  if (framing == ResponseFraming::kContentLength) {
    absl::StrAppend(&head, "Content-Length: ", content_length, "\r\n");
  } else if (framing == ResponseFraming::kNoBody &&
             response.count(http::field::content_length) > 0) {
    absl::StrAppend(&head, "Content-Length: ",
                    std::string(response[http::field::content_length].data(),
                                response[http::field::content_length].size()),
                    "\r\n");
  } else if (framing == ResponseFraming::kChunked) {
    head.append("Transfer-Encoding: chunked\r\n");
  }
  if (!keep_alive) {
    head.append("Connection: close\r\n");
  }
  head.append("\r\n");
  return head;
}

http::request<http::string_body> UpstreamRequest(http::request<http::string_body>& request,
                                                 std::string_view target, const Upstream& upstream,
                                                 const RequestPlan& plan) {
  http::request<http::string_body> out;
  out.method_string(request.method_string());
  out.target(upstream.TargetFor(target));
  out.version(11);
  const std::vector<std::string> listed = ConnectionListed(request.base());
  for (const auto& field : request) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    if (IsHopByHop(name, listed) || field.name() == http::field::host ||
        field.name() == http::field::content_length ||
        field.name() == http::field::accept_encoding || field.name() == http::field::expect) {
      continue;
    }
    out.insert(field.name_string(), field.value());
  }
  out.set(http::field::host, upstream.host_header);
  out.set(http::field::accept_encoding, "identity");
  const bool had_body = request.has_content_length() || request.chunked();
  if (plan.body.has_value()) {
    out.body() = *plan.body;
  } else {
    out.body() = std::move(request.body());  // not copied: a request body may be megabytes
  }
  if (had_body || !out.body().empty()) {
    out.content_length(out.body().size());
  }
  out.keep_alive(true);
  return out;
}

bool StripPathPrefix(const std::string& prefix, std::string_view& target) {
  if (prefix.empty()) {
    return true;
  }
  const bool ours =
      target.starts_with(prefix) && (target.size() == prefix.size() ||
                                     target[prefix.size()] == '/' || target[prefix.size()] == '?');
  if (ours) {
    target.remove_prefix(prefix.size());
  }
  return ours;
}

}  // namespace ktesio::daemon::metering
