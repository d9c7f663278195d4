#include "metering/proxy/http_message.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ktesio::daemon::metering {

// Hop-by-hop headers (RFC 9110 §7.6.1) plus the ones the proxy re-frames or rewrites itself.
bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_listed) {
  static constexpr std::string_view kNames[] = {
      "connection",        "keep-alive",        "proxy-connection", "te",
      "trailer",           "transfer-encoding", "upgrade",          "proxy-authorization",
      "proxy-authenticate"};
  // Compared without a lower-cased copy: this runs for every field of every call.
  const auto same = [&](std::string_view other) {
    return absl::EqualsIgnoreCase(absl::string_view(name.data(), name.size()),
                                  absl::string_view(other.data(), other.size()));
  };
  return std::any_of(std::begin(kNames), std::end(kNames), same) ||
         std::any_of(connection_listed.begin(), connection_listed.end(),
                     [&](const std::string& listed) { return same(listed); });
}

std::string FixedResponse(unsigned status, std::string_view reason, std::string_view body,
                          bool keep_alive, std::string_view extra_headers) {
  return absl::StrCat("HTTP/1.1 ", status, " ", std::string(reason), "\r\n",
                      std::string(extra_headers),
                      "Content-Type: application/json\r\nContent-Length: ", body.size(),
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

namespace {

void AppendField(std::string& out, boost::beast::string_view name,
                 boost::beast::string_view value) {
  out.append(name.data(), name.size()).append(": ").append(value.data(), value.size());
  out.append("\r\n");
}

}  // namespace

std::string ResponseHead(const http::response_header<>& response, ResponseFraming framing,
                         std::uint64_t content_length, bool keep_alive) {
  const boost::beast::string_view reason =
      response.reason().empty() ? http::obsolete_reason(response.result()) : response.reason();
  // Written into one string (a call's head was a dozen allocations as concatenated pieces).
  std::string head;
  head.reserve(256);
  absl::StrAppend(&head, "HTTP/1.1 ", response.result_int(), " ");
  head.append(reason.data(), reason.size()).append("\r\n");
  const std::vector<std::string> listed = ConnectionListed(response);
  for (const auto& field : response) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    if (IsHopByHop(name, listed) || field.name() == http::field::content_length) {
      continue;
    }
    AppendField(head, field.name_string(), field.value());
  }
  if (framing == ResponseFraming::kContentLength) {
    absl::StrAppend(&head, "Content-Length: ", content_length, "\r\n");
  } else if (framing == ResponseFraming::kNoBody &&
             response.count(http::field::content_length) > 0) {
    AppendField(head, "Content-Length", response[http::field::content_length]);
  } else if (framing == ResponseFraming::kChunked) {
    head.append("Transfer-Encoding: chunked\r\n");
  }
  if (!keep_alive) {
    head.append("Connection: close\r\n");
  }
  head.append("\r\n");
  return head;
}

void BodyBytes::Reserve(size_t capacity) {
  if (capacity <= capacity_) {
    return;
  }
  std::unique_ptr<char[]> room(new char[capacity]);  // default-initialised: not filled
  std::copy_n(bytes_.get(), size_, room.get());
  bytes_ = std::move(room);
  capacity_ = capacity;
}

OutgoingRequest UpstreamRequest(AgentRequest& request, std::string_view target,
                                const Upstream& upstream, const RequestPlan& plan) {
  OutgoingRequest out;
  out.post = request.method() == http::verb::post;
  // The head is written as bytes: a Beast message built field by field, then serialised, was a
  // third of the allocations of a call. The agent's fields were validated by the parser.
  std::string& head = out.head;
  head.reserve(512);
  head.append(request.method_string().data(), request.method_string().size()).push_back(' ');
  upstream.AppendTargetFor(target, head);
  head.append(" HTTP/1.1\r\n");
  const std::vector<std::string> listed = ConnectionListed(request.base());
  for (const auto& field : request) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    if (IsHopByHop(name, listed) || field.name() == http::field::host ||
        field.name() == http::field::content_length ||
        field.name() == http::field::accept_encoding || field.name() == http::field::expect) {
      continue;
    }
    AppendField(head, field.name_string(), field.value());
  }
  AppendField(head, "Host", upstream.host_header);
  head.append("Accept-Encoding: identity\r\n");
  const bool had_body = request.has_content_length() || request.chunked();
  out.body = std::move(request.body());  // not copied: a request body may be megabytes
  if (plan.edit.has_value()) {
    out.edit = *plan.edit;
  }
  const size_t length = out.edit.EditedSize(out.body.size());
  if (had_body || length != 0) {
    absl::StrAppend(&head, "Content-Length: ", length, "\r\n");
  }
  head.append("\r\n");  // HTTP/1.1 without "Connection: close": the connection is kept
  return out;
}

bool StripPathPrefix(std::string_view prefix, std::string_view& target) {
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
