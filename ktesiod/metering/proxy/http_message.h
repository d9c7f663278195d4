#pragma once

// The metering proxy's HTTP/1.1 message handling that needs no socket: which headers are
// hop-by-hop, keep-alive, the request sent upstream, the response head sent to the agent, the
// proxy's own fixed replies and the agent's path prefix. Pure functions, unit-tested.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "boost/beast/http.hpp"
#include "metering/proxy/upstream.h"
#include "metering/usage_extract.h"

namespace ktesio::daemon::metering {

namespace http = boost::beast::http;

// A request body's bytes. Unlike a std::string's, its room is not zero-filled when it grows: the
// proxy reads a body into its room as soon as the room is made, and the fill touched every byte
// of a large body once more before the read did (a sixth of the proxy thread's time on a 1 MiB
// body). Bytes past what was written are unspecified; only the first size() are ever read.
class BodyBytes {
 public:
  BodyBytes() = default;
  explicit BodyBytes(std::string_view text) {
    Resize(text.size());
    std::copy(text.begin(), text.end(), bytes_.get());
  }
  BodyBytes(BodyBytes&& other) noexcept { *this = std::move(other); }
  BodyBytes& operator=(BodyBytes&& other) noexcept {
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }
  BodyBytes(const BodyBytes&) = delete;
  BodyBytes& operator=(const BodyBytes&) = delete;
  ~BodyBytes() = default;

  char* data() { return bytes_.get(); }
  const char* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  std::string_view view() const { return {bytes_.get(), size_}; }
  // Room for `capacity` bytes in all, keeping the size and the bytes.
  void Reserve(size_t capacity);
  // Makes the size `size`, keeping the first min(size(), size) bytes; the room grows to exactly
  // `size` when it must (the caller chooses how fast it grows).
  void Resize(size_t size) {
    Reserve(size);
    size_ = size;
  }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// A Beast body of BodyBytes, read only (the proxy writes requests itself): a chunked request's
// body, as the parser removes the chunking. Its room doubles as the body grows: at most twice
// what was sent.
struct RequestBody {
  using value_type = BodyBytes;
  static std::uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool kRequest, class Fields>
    reader(http::header<kRequest, Fields>& /*head*/, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& /*length*/, boost::system::error_code& ec) {
      ec = {};
    }
    template <class ConstBuffers>
    size_t put(const ConstBuffers& buffers, boost::system::error_code& ec) {
      ec = {};
      const size_t at = body_.size();
      const size_t n = boost::asio::buffer_size(buffers);
      if (at + n > body_.capacity()) {
        body_.Reserve(std::max(at + n, 2 * body_.capacity()));
      }
      body_.Resize(at + n);
      return boost::asio::buffer_copy(boost::asio::buffer(body_.data() + at, n), buffers);
    }
    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// The agent's request as the proxy reads it.
using AgentRequest = http::request<RequestBody>;

// Hop-by-hop headers (RFC 9110 §7.6.1) plus the ones the proxy re-frames or rewrites itself;
// `connection_listed` adds the names the Connection field lists (ConnectionListed).
bool IsHopByHop(std::string_view name, const std::vector<std::string>& connection_listed);

// The lower-cased, non-empty items of every `name` field of `head`, in order: a comma-separated
// list may be split over several fields (RFC 9110 §5.3). With `drop_parameters`, a `;` and what
// follows it (a transfer coding's parameters) is dropped from each item.
template <bool isRequest, class Fields>
inline std::vector<std::string> ListTokens(const http::header<isRequest, Fields>& head,
                                           http::field name, bool drop_parameters) {
  std::vector<std::string> tokens;
  for (const auto& field : head) {
    if (field.name() != name) {
      continue;
    }
    for (absl::string_view item :
         absl::StrSplit(absl::string_view(field.value().data(), field.value().size()), ',')) {
      if (drop_parameters) {
        item = item.substr(0, item.find(';'));
      }
      std::string token = absl::AsciiStrToLower(absl::StripAsciiWhitespace(item));
      if (!token.empty()) {
        tokens.push_back(std::move(token));
      }
    }
  }
  return tokens;
}

// The lower-cased tokens of every Connection field (RFC 9112 §9.3; Beast's keep_alive() reads
// only one field).
template <bool isRequest, class Fields>
inline std::vector<std::string> ConnectionTokens(const http::header<isRequest, Fields>& head) {
  return ListTokens(head, http::field::connection, /*drop_parameters=*/false);
}

// What a request's Transfer-Encoding fields say about its body (RFC 9112 §6). The proxy
// understands one coding, `chunked`, applied once and last.
enum class TransferCoding {
  kNone,         // no Transfer-Encoding: Content-Length (or nothing) frames the body
  kChunked,      // exactly "chunked"
  kUnsupported,  // chunked last, but another coding before it: the body cannot be relayed as sent
  kInvalid,      // chunked not last, or twice: the body has no knowable end
};
template <class Fields>
inline TransferCoding RequestTransferCoding(const http::header<true, Fields>& head) {
  // A coding's parameters (";q=…") do not change which coding it is.
  const std::vector<std::string> codings =
      ListTokens(head, http::field::transfer_encoding, /*drop_parameters=*/true);
  if (codings.empty()) {
    return head.find(http::field::transfer_encoding) == head.end() ? TransferCoding::kNone
                                                                   : TransferCoding::kInvalid;
  }
  const auto chunked = std::count(codings.begin(), codings.end(), "chunked");
  if (codings.back() != "chunked" || chunked > 1) {
    return TransferCoding::kInvalid;
  }
  return codings.size() == 1 ? TransferCoding::kChunked : TransferCoding::kUnsupported;
}

// Header names the Connection field lists as hop-by-hop (its tokens other than close/keep-alive).
template <bool isRequest, class Fields>
inline std::vector<std::string> ConnectionListed(const http::header<isRequest, Fields>& head) {
  std::vector<std::string> names = ConnectionTokens(head);
  std::erase_if(names, [](const std::string& n) { return n == "close" || n == "keep-alive"; });
  return names;
}

// Whether the sender wants the connection kept open (HTTP/1.1 unless "close"; HTTP/1.0 only
// with "keep-alive").
template <bool isRequest, class Fields>
inline bool WantsKeepAlive(const http::header<isRequest, Fields>& head) {
  const std::vector<std::string> tokens = ConnectionTokens(head);
  const auto has = [&](std::string_view t) {
    return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
  };
  return !has("close") && (head.version() >= 11 || has("keep-alive"));
}

// A reply of the proxy's own: a JSON `body` with its length, closing unless `keep_alive`;
// `extra_headers` are whole header lines, each ending in CRLF.
std::string FixedResponse(unsigned status, std::string_view reason, std::string_view body,
                          bool keep_alive, std::string_view extra_headers = {});

// How the response body is framed towards the agent.
enum class ResponseFraming {
  kNoBody,          // HEAD, 1xx, 204, 304: the provider's Content-Length (if any) is kept
  kContentLength,   // the provider's length, passed through (nothing is stripped)
  kChunked,         // re-framed for an HTTP/1.1 agent
  kCloseDelimited,  // an HTTP/1.0 agent: the body ends when the connection does
};

// How a response of `status` is framed towards the agent: no body (HEAD, 1xx, 204, 304); the
// provider's Content-Length passed through when it has one and nothing is stripped
// (`rewritten`: the proxy removes injected usage); otherwise chunked for an HTTP/1.1 agent, or
// close-delimited for an HTTP/1.0 one, which also ends `keep_alive`.
ResponseFraming ChooseFraming(unsigned status, bool head_request, bool has_length, bool rewritten,
                              int client_version, bool& keep_alive);

// The head sent to the agent for the provider's `response`: the status line as HTTP/1.1, every
// end-to-end field except Content-Length, then the framing (`content_length` is the provider's,
// used with kContentLength only) and "Connection: close" unless `keep_alive`.
std::string ResponseHead(const http::response_header<>& response, ResponseFraming framing,
                         std::uint64_t content_length, bool keep_alive);

// A request as sent to the provider: its head (request line and fields, through the blank line)
// and the agent's body with the plan's edit, ready to write as pieces (Wire).
struct OutgoingRequest {
  std::string head;
  BodyBytes body;     // the agent's, as it came
  BodyEdit edit;      // the plan's; the default edit (nothing at 0 replaced by "") changes nothing
  bool post = false;  // a POST (only POSTs are model calls)
  // The bytes on the wire, in order: the head, the body before the edit, the edit's text, the
  // body after it.
  std::array<boost::asio::const_buffer, 4> Wire() const {
    const std::string_view agent = body.view();
    const std::string_view before = agent.substr(0, edit.begin);
    const std::string_view after = agent.substr(edit.end);
    return {boost::asio::buffer(head), boost::asio::buffer(before.data(), before.size()),
            boost::asio::buffer(edit.text.data(), edit.text.size()),
            boost::asio::buffer(after.data(), after.size())};
  }
};

// The request sent to the provider for the agent's `request` to `target` (the path below the
// agent's prefix): HTTP/1.1, end-to-end fields only, the upstream's Host, identity encoding
// (usage must stay readable), the agent's body (moved out of `request`) with the plan's edit, a
// Content-Length whenever there is a body, and kept alive.
OutgoingRequest UpstreamRequest(AgentRequest& request, std::string_view target,
                                const Upstream& upstream, const RequestPlan& plan);

// Only the agent's base URL is served: `target` must start with `prefix` ("/kt-<secret>")
// followed by '/', '?' or its end; the prefix is then removed from `target`. An empty prefix
// (an agent started before per-agent paths) accepts any target.
bool StripPathPrefix(std::string_view prefix, std::string_view& target);

}  // namespace ktesio::daemon::metering
