#pragma once

// What the metering proxy understands of model traffic, as pure functions over bytes:
//
// - PlanRequest: recognizes the three model-call shapes by path (OpenAI chat completions, OpenAI
//   Responses, Anthropic Messages) and, for a streaming chat completion whose client did not ask
//   for usage, rewrites the body to ask (`stream_options.include_usage = true`), splicing text so
//   everything else the client sent stays byte-identical.
// - ResponseMeter: fed the response body as it arrives, it extracts the provider-reported usage
//   (JSON `usage`; SSE final chunk, `response.completed`, `message_start` + `message_delta`) and
//   says what to forward: every byte, as received, except — only when the proxy injected
//   include_usage — the extra usage-only chunk the client never asked for.
//
// A model call whose usage is absent (or whose stream was cut off before it) is kUnknown: it is
// counted as an unknown-usage call, never as zero tokens. Pure; thread-compatible.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ktesio/contract/json.h"

namespace ktesio::daemon::metering {

namespace json = ::ktesio::contract::json;

enum class ApiShape { kOther, kChatCompletions, kResponses, kAnthropicMessages };
std::string_view ApiShapeName(ApiShape shape);

// The shape of a request target ("/v1/chat/completions?x=1" → kChatCompletions).
ApiShape ShapeOfTarget(std::string_view target);

// The one kind of rewrite the planner makes: body[begin, end) replaced by `text`, a literal of
// the planner's (it outlives every plan). The proxy sends the body's bytes around it as they are:
// a 64 KiB conversation is not copied to add forty bytes before its first byte goes upstream.
struct BodyEdit {
  size_t begin = 0;
  size_t end = 0;
  std::string_view text;
  // The size of a body of `body_size` bytes once edited.
  size_t EditedSize(size_t body_size) const { return body_size - (end - begin) + text.size(); }
  // `body` edited: what the provider receives.
  std::string Apply(std::string_view body) const;
};

struct RequestPlan {
  ApiShape shape = ApiShape::kOther;
  bool streaming = false;        // a chat completion's JSON body with "stream": true
  std::optional<BodyEdit> edit;  // the body's rewrite, when rewritten
  // The top-level "model" string of a model call's body, "" when absent, not a string, longer
  // than kMaxModelBytes or holding control characters (gen_ai.request.model, "when known").
  std::string model;
  static constexpr size_t kMaxModelBytes = 128;
  // Whether include_usage is added by the proxy (the only rewrite): the usage chunk it brings is
  // then removed from the stream the agent gets.
  bool injected() const { return edit.has_value(); }
};
RequestPlan PlanRequest(std::string_view method, std::string_view target, std::string_view body);

// PlanRequest for a body that arrives in pieces. Arrived, after each piece, does the reading that
// can be done early: a chat completion's body is searched for "stream" and, once it mentions it,
// validated as it comes (json::ShallowScanner). Finish then reads only what came last: a 1 MiB
// conversation is not read whole between its last byte and its first byte upstream.
// Finish(body) returns exactly PlanRequest(method, target, body) for the body whose growth
// Arrived saw (a body that grew without Arrived calls is planned at Finish alike). Once.
class RequestPlanner {
 public:
  RequestPlanner() = default;  // plans a request that is not a model call
  RequestPlanner(std::string_view method, std::string_view target);
  // `body` is the body so far: what earlier calls saw, grown (it may have moved).
  void Arrived(std::string_view body);
  RequestPlan Finish(std::string_view body);

 private:
  // Whether the body mentions "stream" (MentionsStream), searching from where the last search
  // stopped: less the needle's length, as it may straddle the end of what had come.
  bool SearchStream(std::string_view body);

  ApiShape shape_ = ApiShape::kOther;
  size_t searched_ = 0;  // MentionsStream has read body[0, searched_)
  bool mentions_ = false;
  json::ShallowScanner scanner_;  // advanced once the body mentions "stream"
};

// Whether `body` may ask for a stream: the text "stream" in quotes appears in it (as body.find
// would say), or a lowercase letter written as an escape (\u0060 to \u007f), which could spell
// the key another way. A body with neither cannot ask for a stream, and a JSON call's plan then
// parses nothing.
bool MentionsStream(std::string_view body);

struct TokenUsage {
  uint64_t input = 0;
  uint64_t output = 0;
  bool operator==(const TokenUsage&) const = default;
};

class ResponseMeter {
 public:
  // Bodies kept for parsing are capped (a larger JSON body is relayed but its usage is unknown).
  static constexpr size_t kMaxParsedBytes = 16u << 20;

  // `post`: only POST requests are model calls (a GET of a stored response repeats its usage).
  ResponseMeter(ApiShape shape, bool strip_injected_usage, bool post = true)
      : shape_(shape), strip_(strip_injected_usage), post_(post) {}

  // Makes the meter as new for another response (a connection meters its responses one after the
  // other with one meter), keeping its buffers' capacity up to kKeptCapacity: their growth was
  // a third of the proxy's allocations per call.
  void Reset(ApiShape shape, bool strip_injected_usage, bool post = true);
  static constexpr size_t kKeptCapacity = 64u << 10;
  // The capacity of the meter's buffers together (what a reused meter holds between responses).
  size_t held_capacity() const;

  // The response head: only 2xx responses are metered; SSE is recognized by content type.
  void Begin(unsigned status, std::string_view content_type);
  // Body bytes as they arrive; appends what must be forwarded to the client now to `forward`.
  void Feed(std::string_view data, std::string& forward);
  // End of body (`complete` = false when it was cut off); appends any held-back bytes.
  void Finish(bool complete, std::string& forward);

  enum class Outcome { kNotMetered, kKnown, kUnknown };
  Outcome outcome() const;
  // Whether the body is an event stream (known after Begin).
  bool streaming() const { return sse_; }
  TokenUsage usage() const { return usage_; }

 private:
  void OnLine(std::string_view line);
  void Dispatch();
  void Observe(const json::Value& value);
  void ObserveUsageObject(const json::Value& usage);

  ApiShape shape_;
  bool strip_;
  bool post_;
  bool metered_ = false;
  bool sse_ = false;
  bool overflow_ = false;
  std::string body_;        // JSON: the whole body (capped); SSE: the current partial line
  std::string event_raw_;   // SSE with stripping: the raw bytes of the event being assembled
  std::string event_data_;  // SSE: the event's data lines, joined by '\n'
  bool event_has_data_ = false;
  bool drop_event_ = false;
  bool pending_cr_ = false;
  std::string* forward_ = nullptr;  // the caller's output during Feed()
  // Usage bookkeeping.
  bool known_ = false;
  bool anthropic_started_ = false;
  uint64_t anthropic_input_ = 0, anthropic_cache_create_ = 0, anthropic_cache_read_ = 0;
  TokenUsage usage_;
};

}  // namespace ktesio::daemon::metering
