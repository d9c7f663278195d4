// The metering proxy's socket-free HTTP handling: hop-by-hop fields, keep-alive, the request
// sent upstream, the response head sent to the agent, fixed replies and the path prefix.

#include "metering/proxy/http_message.h"

#include "gtest/gtest.h"
#include "status_assertions.h"

namespace ktesio::daemon::metering {
namespace {

http::response_header<> Response(unsigned status, std::string_view reason = "") {
  http::response_header<> response;
  response.result(status);
  response.version(11);
  if (!reason.empty()) {
    response.reason(boost::beast::string_view(reason.data(), reason.size()));
  }
  return response;
}

TEST(HttpMessage, HopByHopFieldsAreRecognisedWhateverTheirCaseAndWhatConnectionLists) {
  EXPECT_TRUE(IsHopByHop("Connection", {}));
  EXPECT_TRUE(IsHopByHop("KEEP-ALIVE", {}));
  EXPECT_TRUE(IsHopByHop("Transfer-Encoding", {}));
  EXPECT_TRUE(IsHopByHop("Proxy-Authorization", {}));
  EXPECT_FALSE(IsHopByHop("Authorization", {}));
  EXPECT_FALSE(IsHopByHop("X-Trace", {}));
  EXPECT_TRUE(IsHopByHop("X-Trace", {"x-trace"}));
}

TEST(HttpMessage, KeepAliveFollowsEveryConnectionFieldAndTheVersion) {
  http::request_header<> request;
  request.version(11);
  EXPECT_TRUE(WantsKeepAlive(request));
  request.insert(http::field::connection, "x-trace");
  request.insert(http::field::connection, "Close");  // a second field, mixed case
  EXPECT_FALSE(WantsKeepAlive(request));
  EXPECT_EQ(ConnectionListed(request), std::vector<std::string>{"x-trace"});
  http::request_header<> old;
  old.version(10);
  EXPECT_FALSE(WantsKeepAlive(old));
  old.set(http::field::connection, "keep-alive");
  EXPECT_TRUE(WantsKeepAlive(old));
}

// Only one chunked coding, last, is understood; RFC 9112 §6.3 makes anything else with chunked
// not last a request without a knowable end.
TEST(HttpMessage, TheRequestTransferCodingIsChunkedOnceAndLastOrRefused) {
  auto coding = [](std::vector<std::string> values) {
    http::request_header<> request;
    for (const std::string& value : values) {
      request.insert(http::field::transfer_encoding, value);
    }
    return RequestTransferCoding(request);
  };
  EXPECT_EQ(coding({}), TransferCoding::kNone);
  EXPECT_EQ(coding({"chunked"}), TransferCoding::kChunked);
  EXPECT_EQ(coding({" Chunked "}), TransferCoding::kChunked);
  EXPECT_EQ(coding({"gzip, chunked"}), TransferCoding::kUnsupported);
  EXPECT_EQ(coding({"gzip", "chunked"}), TransferCoding::kUnsupported);  // two fields, one list
  EXPECT_EQ(coding({"gzip"}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({"identity"}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({"chunked, gzip"}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({"chunked, chunked"}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({"chunked", "chunked"}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({""}), TransferCoding::kInvalid);
  EXPECT_EQ(coding({" , "}), TransferCoding::kInvalid);
}

TEST(HttpMessage, AFixedReplyIsJsonWithItsLengthAndClosesUnlessKeptAlive) {
  EXPECT_EQ(FixedResponse(429, "Too Many Requests", R"({"e":1})", true),
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            "Content-Length: 7\r\n\r\n{\"e\":1}");
  EXPECT_EQ(FixedResponse(502, "Bad Gateway", "", false),
            "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(FixedResponse(405, "Method Not Allowed", "", false, "Allow: GET\r\n"),
            "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Type: application/json\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST(HttpMessage, AResponseHeadKeepsEndToEndFieldsAndReframesTheBody) {
  http::response_header<> response = Response(200, "OK");
  response.insert(http::field::content_type, "text/event-stream");
  response.insert(http::field::transfer_encoding, "chunked");
  response.insert(http::field::connection, "x-hop");
  response.insert("X-Hop", "dropped");
  response.insert("X-Request-Id", "r1");
  response.insert(http::field::content_length, "99");
  EXPECT_EQ(ResponseHead(response, ResponseFraming::kChunked, 0, true),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Request-Id: r1\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(ResponseHead(response, ResponseFraming::kContentLength, 42, false),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Request-Id: r1\r\n"
            "Content-Length: 42\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ResponseHead(response, ResponseFraming::kCloseDelimited, 0, false),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Request-Id: r1\r\n"
            "Connection: close\r\n\r\n");
}

TEST(HttpMessage, TheFramingKeepsTheProvidersLengthUnlessTheBodyIsRewritten) {
  bool keep_alive = true;
  for (unsigned status : {100u, 204u, 304u}) {
    EXPECT_EQ(ChooseFraming(status, false, true, false, 11, keep_alive), ResponseFraming::kNoBody);
  }
  EXPECT_EQ(ChooseFraming(200, true, true, false, 11, keep_alive), ResponseFraming::kNoBody);
  EXPECT_EQ(ChooseFraming(200, false, true, false, 10, keep_alive),
            ResponseFraming::kContentLength);
  EXPECT_EQ(ChooseFraming(200, false, true, true, 11, keep_alive), ResponseFraming::kChunked);
  EXPECT_EQ(ChooseFraming(200, false, false, false, 11, keep_alive), ResponseFraming::kChunked);
  EXPECT_TRUE(keep_alive);
  // An HTTP/1.0 agent without a length to pass through: the body ends with the connection.
  EXPECT_EQ(ChooseFraming(200, false, false, false, 10, keep_alive),
            ResponseFraming::kCloseDelimited);
  EXPECT_FALSE(keep_alive);
}

TEST(HttpMessage, ABodilessResponseKeepsTheProvidersLengthAndGetsAReasonWhenItHasNone) {
  http::response_header<> response = Response(304);
  response.insert(http::field::content_length, "12");
  EXPECT_EQ(ResponseHead(response, ResponseFraming::kNoBody, 0, true),
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 12\r\n\r\n");
  EXPECT_EQ(ResponseHead(Response(204), ResponseFraming::kNoBody, 0, true),
            "HTTP/1.1 204 No Content\r\n\r\n");
}

// The agent's body as the proxy holds it.
BodyBytes Bytes(std::string_view text) { return BodyBytes(text); }

// Parses the bytes UpstreamRequest would send, as the provider would (the whole message).
http::request<http::string_body> ParseSent(const OutgoingRequest& sent) {
  std::string wire;
  for (const boost::asio::const_buffer& piece : sent.Wire()) {
    wire.append(static_cast<const char*>(piece.data()), piece.size());
  }
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  boost::system::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message() << " in: " << wire;
  if (!parser.is_done() && !ec) {
    parser.put_eof(ec);
  }
  EXPECT_TRUE(parser.is_done()) << wire;
  EXPECT_EQ(used, wire.size()) << wire;
  return parser.release();
}

TEST(HttpMessage, TheUpstreamRequestCarriesOnlyEndToEndFieldsAndThePlannedBody) {
  absl::StatusOr<Upstream> upstream =
      ParseUpstream("metering.upstream_base_url", "http://api.example.com:8080/v1");
  KT_ASSERT_OK(upstream.status());
  AgentRequest request{http::verb::post, "/kt-x/chat/completions", 10};
  request.set(http::field::host, "127.0.0.1:5000");
  request.set(http::field::authorization, "Bearer k");
  request.set(http::field::accept_encoding, "gzip");
  request.set(http::field::expect, "100-continue");
  request.set(http::field::connection, "keep-alive, x-hop");
  request.set("X-Hop", "dropped");
  request.body() = Bytes(R"({"model":"m","stream":true})");
  request.prepare_payload();
  RequestPlan plan;
  const std::string planned =
      R"({"model":"m","stream":true,"stream_options":{"include_usage":true}})";
  plan.edit = BodyEdit{26, 26, R"(,"stream_options":{"include_usage":true})"};
  const OutgoingRequest sent = UpstreamRequest(request, "/chat/completions", *upstream, plan);
  EXPECT_TRUE(sent.post);
  // What goes on the wire, read back as the provider reads it.
  const http::request<http::string_body> out = ParseSent(sent);
  EXPECT_EQ(out.method(), http::verb::post);
  EXPECT_EQ(std::string(out.target()), "/v1/chat/completions");
  EXPECT_EQ(out.version(), 11u);
  EXPECT_EQ(std::string(out[http::field::host]), "api.example.com:8080");
  EXPECT_EQ(std::string(out[http::field::authorization]), "Bearer k");
  EXPECT_EQ(std::string(out[http::field::accept_encoding]), "identity");
  EXPECT_EQ(out.count(http::field::expect), 0u);
  EXPECT_EQ(out.count(http::field::connection), 0u);
  EXPECT_EQ(out.count("X-Hop"), 0u);
  EXPECT_EQ(out.count(http::field::host), 1u);
  EXPECT_EQ(out.body(), planned);
  EXPECT_EQ(std::string(out[http::field::content_length]), std::to_string(planned.size()));
  EXPECT_TRUE(out.keep_alive());
  // A plan that replaces a span in the middle: the bytes on either side go as they came, and the
  // length is the edited body's.
  const std::string_view asked_body =
      R"({"stream":true,"stream_options":{"include_usage":false},"n":1})";
  AgentRequest asked_no{http::verb::post, "/v1/chat/completions", 11};
  asked_no.body() = Bytes(asked_body);
  asked_no.prepare_payload();
  const RequestPlan replace = PlanRequest("POST", "/v1/chat/completions", asked_body);
  ASSERT_TRUE(replace.edit.has_value());
  const http::request<http::string_body> replaced =
      ParseSent(UpstreamRequest(asked_no, "/chat/completions", *upstream, replace));
  EXPECT_EQ(replaced.body(), R"({"stream":true,"stream_options":{"include_usage":true},"n":1})");
  EXPECT_EQ(std::string(replaced[http::field::content_length]),
            std::to_string(replaced.body().size()));
  // Without a rewrite the agent's own body goes; a request without one declares none.
  RequestPlan no_rewrite;
  AgentRequest own{http::verb::post, "/embeddings", 11};
  own.body() = Bytes(R"({"input":"x"})");
  own.prepare_payload();
  const http::request<http::string_body> forwarded =
      ParseSent(UpstreamRequest(own, "/embeddings", *upstream, no_rewrite));
  EXPECT_EQ(forwarded.body(), R"({"input":"x"})");
  EXPECT_EQ(std::string(forwarded[http::field::content_length]), "13");
  AgentRequest get{http::verb::get, "/models?x=1", 11};
  const OutgoingRequest plain_sent = UpstreamRequest(get, "/models?x=1", *upstream, no_rewrite);
  EXPECT_FALSE(plain_sent.post);
  EXPECT_EQ(plain_sent.head,
            "GET /v1/models?x=1 HTTP/1.1\r\nHost: api.example.com:8080\r\n"
            "Accept-Encoding: identity\r\n\r\n");
  const http::request<http::string_body> plain = ParseSent(plain_sent);
  EXPECT_EQ(plain.count(http::field::content_length), 0u);
}

// The room of a body grows only as asked, keeps what was written, and a move leaves nothing
// behind; a chunked body is put together by the parser, the room doubling as it comes.
TEST(HttpMessage, BodyBytesKeepWhatWasWrittenAndGrowOnlyAsAsked) {
  BodyBytes body(std::string_view("hello"));
  EXPECT_EQ(body.view(), "hello");
  EXPECT_EQ(body.capacity(), 5u);
  body.Resize(3);
  EXPECT_EQ(body.view(), "hel");
  EXPECT_EQ(body.capacity(), 5u);
  body.Reserve(4);  // less than it has: nothing moves
  EXPECT_EQ(body.capacity(), 5u);
  body.Resize(1000);
  EXPECT_EQ(body.capacity(), 1000u);
  EXPECT_EQ(body.view().substr(0, 3), "hel");
  BodyBytes moved(std::move(body));
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(body.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from body is empty
  EXPECT_EQ(body.capacity(), 0u);

  http::request_parser<RequestBody> parser;
  parser.eager(true);
  const std::string wire =
      "POST /v1/responses HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\n{\"a\":\r\n" +
      std::string("3\r\n1}\n\r\n") + "0\r\n\r\n";
  boost::system::error_code ec;
  EXPECT_EQ(parser.put(boost::asio::buffer(wire), ec), wire.size());
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  AgentRequest request = parser.release();
  EXPECT_EQ(request.body().view(), "{\"a\":1}\n");
  EXPECT_GE(request.body().capacity(), request.body().size());
  EXPECT_LE(request.body().capacity(), 2 * request.body().size());
}

TEST(HttpMessage, OnlyTheAgentsPathPrefixIsServed) {
  struct Case {
    std::string prefix;
    std::string_view target;
    bool served;
    std::string_view rest;  // the target below the prefix (unchanged when refused)
  };
  const Case cases[] = {
      {"/kt-abc", "/kt-abc/v1/chat?x=1", true, "/v1/chat?x=1"},
      {"/kt-abc", "/kt-abc?x=1", true, "?x=1"},
      {"/kt-abc", "/kt-abc", true, ""},
      {"/kt-abc", "/kt-abcd/v1", false, "/kt-abcd/v1"},
      {"/kt-abc", "/v1/chat", false, "/v1/chat"},
      {"", "/v1/chat", true, "/v1/chat"},  // an agent from before per-agent paths
  };
  for (const Case& c : cases) {
    std::string_view target = c.target;
    EXPECT_EQ(StripPathPrefix(c.prefix, target), c.served) << c.prefix << " " << c.target;
    EXPECT_EQ(target, c.rest) << c.prefix << " " << c.target;
  }
}

}  // namespace
}  // namespace ktesio::daemon::metering
