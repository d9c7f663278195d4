#include "metering/usage_extract.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "ktesio/contract/utf8.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__)
#include <immintrin.h>
#define KTESIO_MENTIONS_AVX2 1
#endif

namespace ktesio::daemon::metering {
namespace {

// The first '\r' or '\n' at or after `at`, or npos. Two vectorised scans: find_first_of with a
// two-character set looks each byte up in the set, which was a tenth of the proxy's time.
size_t FindLineEnd(std::string_view data, size_t at) {
  const size_t newline = data.find('\n', at);
  const size_t limit = newline == std::string_view::npos ? data.size() : newline;
  if (at >= limit) {
    return newline;
  }
  const void* cr = std::memchr(data.data() + at, '\r', limit - at);
  return cr == nullptr ? newline : static_cast<size_t>(static_cast<const char*>(cr) - data.data());
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// ASCII only (header values), inline: the C library's tolower, a call per character, showed in
// profiles of the proxy thread.
bool ContainsIgnoreCase(std::string_view text, std::string_view needle) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  auto it = std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != text.end();
}

// Token counts beyond the ledger's signed 64-bit range are not believable: treated as absent.
constexpr uint64_t kMaxTokens = static_cast<uint64_t>(INT64_MAX);

uint64_t SaturatingSum(std::initializer_list<uint64_t> values) {
  uint64_t sum = 0;
  for (uint64_t v : values) {
    sum = v > kMaxTokens - sum ? kMaxTokens : sum + v;
  }
  return sum;
}

std::optional<uint64_t> Tokens(const json::Value* value) {
  if (value == nullptr) {
    return std::nullopt;
  }
  std::optional<uint64_t> n = value->AsUint();
  return n.has_value() && *n <= kMaxTokens ? n : std::nullopt;
}

uint64_t UintOr(const json::Value* value, uint64_t fallback) {
  return Tokens(value).value_or(fallback);
}

}  // namespace

std::string_view ApiShapeName(ApiShape shape) {
  switch (shape) {
    case ApiShape::kChatCompletions:
      return "openai-chat";
    case ApiShape::kResponses:
      return "openai-responses";
    case ApiShape::kAnthropicMessages:
      return "anthropic-messages";
    case ApiShape::kOther:
      break;
  }
  return "other";
}

ApiShape ShapeOfTarget(std::string_view target) {
  std::string_view path = target.substr(0, target.find_first_of("?#"));
  while (path.size() > 1 && path.back() == '/') {
    path.remove_suffix(1);
  }
  if (EndsWith(path, "/chat/completions")) {
    return ApiShape::kChatCompletions;
  }
  if (EndsWith(path, "/responses")) {
    return ApiShape::kResponses;
  }
  if (EndsWith(path, "/messages") && path.find("/threads/") == std::string_view::npos) {
    return ApiShape::kAnthropicMessages;
  }
  return ApiShape::kOther;
}

namespace {

// A model name fit for a metric attribute: bounded, printable, UTF-8 (the planner does not check
// the bytes inside a body's strings, and a label or an OTLP attribute that is not UTF-8 spoils
// the whole scrape or export).
bool AcceptableModel(std::string_view model) {
  if (model.empty() || model.size() > RequestPlan::kMaxModelBytes) {
    return false;
  }
  return std::none_of(model.begin(), model.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }) &&
         contract::IsValidUtf8(model);
}

// When a body's first member is "model" with a string value (as most clients write it), reads
// it into `model` without parsing the rest and returns true. False: the body must be parsed to
// know (the model comes later, or the body is not what it seems).
bool LeadingModel(std::string_view body, std::string& model) {
  size_t at = 0;
  auto skip_space = [&] {
    while (at < body.size() &&
           (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' || body[at] == '\r')) {
      ++at;
    }
  };
  skip_space();
  if (at >= body.size() || body[at] != '{') {
    return false;
  }
  ++at;
  skip_space();
  constexpr std::string_view kKey = "\"model\"";
  if (body.substr(at, kKey.size()) != kKey) {
    return false;
  }
  at += kKey.size();
  skip_space();
  if (at >= body.size() || body[at] != ':') {
    return false;
  }
  ++at;
  skip_space();
  if (at >= body.size() || body[at] != '"') {
    return false;
  }
  std::string value;
  if (!json::DecodeString(body, at, value).empty()) {
    return false;
  }
  model = AcceptableModel(value) ? std::move(value) : "";
  return true;
}

}  // namespace

std::string BodyEdit::Apply(std::string_view body) const {
  std::string out;
  out.reserve(EditedSize(body.size()));
  out.append(body.substr(0, begin)).append(text).append(body.substr(end));
  return out;
}

namespace {

// Whether an escape of a lowercase ASCII letter starts at `at` (\u0060 to \u007f: the letters
// and the six code points beside them). A key can be written so ("stre\u0061m" is "stream"),
// and no serializer writes a letter so.
bool EscapedLetterAt(std::string_view body, size_t at) {
  return body.compare(at, 4, "\\u00") == 0 && at + 4 < body.size() &&
         (body[at + 4] == '6' || body[at + 4] == '7');
}

constexpr std::string_view kStreamNeedle = "\"stream\"";

#if defined(__SSE2__)  // every x86-64, the only place the block searches below are built
// Whether one of the places a search block marked is the needle or an escaped letter: bit i of
// `bits` is the place at + i. Both widths of the search below compare their candidates here.
bool AnyCandidateMentions(std::string_view body, size_t at, uint32_t bits) {
  for (; bits != 0; bits &= bits - 1) {
    const size_t candidate = at + static_cast<size_t>(__builtin_ctz(bits));
    if (body.compare(candidate, kStreamNeedle.size(), kStreamNeedle) == 0 ||
        EscapedLetterAt(body, candidate)) {
      return true;
    }
  }
  return false;
}
#endif

#if KTESIO_MENTIONS_AVX2
// The search below, 32 places at a time, where the processor has AVX2 (asked once: the build
// targets baseline x86-64, so these instructions are used only in this function). Searches from
// `at` while 32 + 7 bytes remain, leaving `at` where it stopped; true when a candidate is the
// needle or an escaped letter. A 1 MiB JSON call was searched in 101 us sixteen places at a time.
__attribute__((target("avx2"))) bool MentionsStreamAvx2(std::string_view body, size_t& at) {
  const char* const data = body.data();
  const __m256i quote = _mm256_set1_epi8('"');
  const __m256i s = _mm256_set1_epi8('s');
  const __m256i m = _mm256_set1_epi8('m');
  const __m256i backslash = _mm256_set1_epi8('\\');
  const __m256i zero = _mm256_set1_epi8('0');
  // No lambda for the loads: it would be a function without this target, and the intrinsics
  // could not be inlined into it.
  while (body.size() - at >= 32 + kStreamNeedle.size() - 1) {
    const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at));
    const __m256i second = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + 1));
    const __m256i third = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + 2));
    const __m256i seventh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + 6));
    const __m256i needles = _mm256_and_si256(
        _mm256_and_si256(_mm256_cmpeq_epi8(first, quote), _mm256_cmpeq_epi8(second, s)),
        _mm256_cmpeq_epi8(seventh, m));
    const __m256i escapes =
        _mm256_and_si256(_mm256_cmpeq_epi8(first, backslash), _mm256_cmpeq_epi8(third, zero));
    const auto bits =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_or_si256(needles, escapes)));
    if (bits != 0 && AnyCandidateMentions(body, at, bits)) {
      return true;
    }
    at += 32;
  }
  return false;
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") != 0;
  return has;
}
#endif

}  // namespace

bool MentionsStream(std::string_view body) {
  size_t at = 0;
#if KTESIO_MENTIONS_AVX2
  if (CpuHasAvx2() && MentionsStreamAvx2(body, at)) {
    return true;
  }
#endif
#if defined(__SSE2__)
  // A conversation is a quote every few dozen bytes, and a search that stops at each quote to
  // compare (find, memmem) cost a JSON call 9 us per 64 KiB. Here sixteen places at a time must
  // hold '"', 's' and 'm' where the needle has them, or '\\' and '0' where an escaped letter has
  // them, before one is compared whole (a JSON call of 64 KiB planned in 4.7 us; 3.3 when only
  // the needle was searched for).
  const char* const data = body.data();
  const auto load = [data](size_t from) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + from));
  };
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i s = _mm_set1_epi8('s');
  const __m128i m = _mm_set1_epi8('m');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i zero = _mm_set1_epi8('0');
  // Each candidate at at..at+15 is compared with all 8 bytes, so 16 + 7 bytes must be there.
  while (body.size() - at >= 16 + kStreamNeedle.size() - 1) {
    const __m128i first = load(at);
    const __m128i needles =
        _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(first, quote), _mm_cmpeq_epi8(load(at + 1), s)),
                      _mm_cmpeq_epi8(load(at + 6), m));
    const __m128i escapes =
        _mm_and_si128(_mm_cmpeq_epi8(first, backslash), _mm_cmpeq_epi8(load(at + 2), zero));
    const auto bits = static_cast<uint32_t>(_mm_movemask_epi8(_mm_or_si128(needles, escapes)));
    if (bits != 0 && AnyCandidateMentions(body, at, bits)) {
      return true;
    }
    at += 16;
  }
#endif
  if (body.find(kStreamNeedle, at) != std::string_view::npos) {
    return true;
  }
  for (at = body.find('\\', at); at != std::string_view::npos; at = body.find('\\', at + 1)) {
    if (EscapedLetterAt(body, at)) {
      return true;
    }
  }
  return false;
}

RequestPlan PlanRequest(std::string_view method, std::string_view target, std::string_view body) {
  return RequestPlanner(method, target).Finish(body);
}

RequestPlanner::RequestPlanner(std::string_view method, std::string_view target)
    : shape_(method == "POST" ? ShapeOfTarget(target) : ApiShape::kOther) {}

bool RequestPlanner::SearchStream(std::string_view body) {
  if (!mentions_) {
    // What straddled the end of the last search is searched again: the needle's first 7 bytes
    // at most (an escaped letter's first 4).
    constexpr size_t kOverlap = 7;
    const size_t from = searched_ > kOverlap ? searched_ - kOverlap : 0;
    mentions_ = MentionsStream(body.substr(from));
    searched_ = body.size();
  }
  return mentions_;
}

void RequestPlanner::Arrived(std::string_view body) {
  // Only a chat completion's body is read whole before it goes upstream, and only when it
  // mentions "stream" (PlanRequest).
  if (shape_ == ApiShape::kChatCompletions && SearchStream(body)) {
    scanner_.Advance(body);
  }
}

RequestPlan RequestPlanner::Finish(std::string_view body) {
  RequestPlan plan;
  plan.shape = shape_;
  if (plan.shape == ApiShape::kOther) {
    return plan;
  }
  // Only a chat completion's body may be rewritten (include_usage): of any other shape's, the
  // model is all the plan reads — without scanning a long conversation for "stream" when it leads.
  const bool may_stream = plan.shape == ApiShape::kChatCompletions && SearchStream(body);
  if (!may_stream && LeadingModel(body, plan.model)) {
    return plan;  // nothing to rewrite, and the model leads: no need to parse the body
  }
  // The body is validated whole, but only its top level is built: most of a model call's body is
  // conversation history, which a full parse would copy string by string before the first byte
  // goes upstream (time to first token).
  std::optional<json::Value> root = may_stream ? scanner_.Finish(body) : json::ParseShallow(body);
  if (!root.has_value() || root->kind != json::Kind::kObject) {
    return plan;  // relayed untouched; the provider judges it
  }
  if (const json::Value* model = root->Find("model");
      model != nullptr && model->kind == json::Kind::kString) {
    plan.model = AcceptableModel(model->text) ? model->text : "";
  }
  if (!may_stream) {
    return plan;
  }
  const json::Value* stream = root->Find("stream");
  plan.streaming = stream != nullptr && stream->kind == json::Kind::kBool && stream->boolean;
  if (!plan.streaming) {
    return plan;
  }
  const json::Value* options = root->Find("stream_options");
  if (options == nullptr) {
    plan.edit =
        BodyEdit{root->begin + 1, root->begin + 1, R"("stream_options":{"include_usage":true},)"};
  } else if (options->kind == json::Kind::kNull) {
    plan.edit = BodyEdit{options->begin, options->end, R"({"include_usage":true})"};
  } else if (options->kind == json::Kind::kObject) {
    // Its members (include_usage is a scalar: its own top level is enough). Validated above, so
    // this parse does not fail; its spans count from options->begin.
    const std::optional<json::Value> inside =
        json::ParseShallow(body.substr(options->begin, options->end - options->begin));
    if (!inside.has_value()) {
      return plan;
    }
    const json::Value* include = inside->Find("include_usage");
    if (include != nullptr && include->kind == json::Kind::kBool && include->boolean) {
      return plan;  // the client asked: nothing to inject, nothing to strip
    }
    if (include != nullptr && include->kind != json::Kind::kBool &&
        include->kind != json::Kind::kNull) {
      return plan;  // neither a yes nor a no (`1`, "true"): the provider judges it, untouched
    }
    if (include != nullptr) {
      plan.edit = BodyEdit{options->begin + include->begin, options->begin + include->end, "true"};
    } else {
      plan.edit = BodyEdit{
          options->begin + 1, options->begin + 1,
          inside->members.empty() ? R"("include_usage":true)" : R"("include_usage":true,)"};
    }
  }
  // Any other stream_options is malformed: relayed untouched, the provider will say so.
  return plan;
}

void ResponseMeter::Reset(ApiShape shape, bool strip_injected_usage, bool post) {
  // Every member as a new meter has it (so a member added later cannot be forgotten here), then
  // the three buffers back, emptied. An oversized buffer is released first: assigning an empty
  // string keeps the target's allocation.
  std::string* const buffers[] = {&body_, &event_raw_, &event_data_};
  std::string kept[3];
  for (size_t i = 0; i < 3; ++i) {
    if (buffers[i]->capacity() > kKeptCapacity) {
      std::string().swap(*buffers[i]);
    } else {
      kept[i] = std::move(*buffers[i]);
      kept[i].clear();
    }
  }
  *this = ResponseMeter(shape, strip_injected_usage, post);
  for (size_t i = 0; i < 3; ++i) {
    *buffers[i] = std::move(kept[i]);
  }
}

size_t ResponseMeter::held_capacity() const {
  return body_.capacity() + event_raw_.capacity() + event_data_.capacity();
}

void ResponseMeter::Begin(unsigned status, std::string_view content_type) {
  metered_ = post_ && status >= 200 && status < 300;
  sse_ = ContainsIgnoreCase(content_type, "text/event-stream");
}

void ResponseMeter::Feed(std::string_view data, std::string& forward) {
  if (!metered_ || overflow_) {
    forward.append(data);
    return;
  }
  if (!sse_) {
    forward.append(data);
    if (body_.size() + data.size() > kMaxParsedBytes) {
      overflow_ = true;
      body_.clear();
      return;
    }
    body_.append(data);
    return;
  }
  forward_ = &forward;
  const bool holding = strip_;
  size_t at = 0;
  while (at < data.size()) {
    if (pending_cr_) {
      pending_cr_ = false;
      if (data[at] == '\n') {
        if (holding) {
          event_raw_.push_back('\n');
        }
        ++at;
        continue;
      }
    }
    const size_t eol = FindLineEnd(data, at);
    const size_t end = eol == std::string_view::npos ? data.size() : eol;
    if (holding) {
      event_raw_.append(data.substr(at, end - at + (eol == std::string_view::npos ? 0 : 1)));
    }
    if (eol == std::string_view::npos) {
      body_.append(data.substr(at, end - at));  // a partial line, completed by the next chunk
      break;
    }
    pending_cr_ = data[eol] == '\r';
    if (body_.empty()) {
      OnLine(data.substr(at, end - at));  // the whole line is in this chunk: no copy
    } else {
      body_.append(data.substr(at, end - at));
      OnLine(body_);
      body_.clear();
    }
    at = eol + 1;
  }
  if (!holding) {
    forward.append(data);
  }
  if (body_.size() + event_raw_.size() + event_data_.size() > kMaxParsedBytes) {
    // An event this large is not a usage chunk: stop parsing (and holding), relay the rest.
    overflow_ = true;
    forward.append(event_raw_);
    event_raw_.clear();
    event_data_.clear();
    body_.clear();
  }
  forward_ = nullptr;
}

void ResponseMeter::Finish(bool complete, std::string& forward) {
  if (!metered_) {
    return;
  }
  if (sse_) {
    forward.append(event_raw_);  // an unterminated last event: relayed as received
    event_raw_.clear();
    return;
  }
  if (complete && !overflow_) {
    if (std::optional<json::Value> root = json::Parse(body_)) {
      Observe(*root);
    }
  }
  body_.clear();
}

void ResponseMeter::OnLine(std::string_view line) {
  if (line.empty()) {
    Dispatch();
    return;
  }
  if (line.front() == ':') {
    return;  // comment
  }
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  if (field == "data") {
    if (event_has_data_) {
      event_data_.push_back('\n');
    }
    event_data_.append(value);
    event_has_data_ = true;
  }
}

namespace {

// Whether an event's data can carry usage: some `"usage"` key whose value is an object. Most
// stream events (every content delta, `"usage":null` chunks) fail this cheap test and are never
// parsed.
// The next `"usage"` in `data` from `from`, or npos. It looks for the key's 'g' with memchr and
// compares around it: 'g' is rare in stream events, where '"' (string_view::find's first
// character) is everywhere, and glibc's memmem set up a shift table on each of the two calls
// per event (3 % of the proxy thread).
size_t FindUsageKey(std::string_view data, size_t from) {
  constexpr std::string_view kKey = "\"usage\"";
  constexpr size_t kAt = 4;  // kKey[kAt] == 'g'
  size_t at = from + kAt;
  while (at + (kKey.size() - kAt) <= data.size()) {
    const void* hit =
        std::memchr(data.data() + at, 'g', data.size() - at - (kKey.size() - kAt - 1));
    if (hit == nullptr) {
      break;
    }
    const size_t g = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
    if (data.compare(g - kAt, kKey.size(), kKey) == 0) {
      return g - kAt;
    }
    at = g + 1;
  }
  return std::string_view::npos;
}

bool MayCarryUsage(std::string_view data) {
  for (size_t at = FindUsageKey(data, 0); at != std::string_view::npos;
       at = FindUsageKey(data, at + 1)) {
    size_t i = at + 7;
    while (i < data.size() && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n')) ++i;
    if (i >= data.size() || data[i] != ':') continue;
    ++i;
    while (i < data.size() && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n')) ++i;
    if (i < data.size() && data[i] == '{') return true;
  }
  return false;
}

}  // namespace

void ResponseMeter::Dispatch() {
  if (event_has_data_ && event_data_ != "[DONE]" && MayCarryUsage(event_data_)) {
    if (std::optional<json::Value> value = json::Parse(event_data_)) {
      Observe(*value);
      if (strip_) {
        const json::Value* choices = value->Find("choices");
        const json::Value* usage = value->Find("usage");
        drop_event_ = choices != nullptr && choices->kind == json::Kind::kArray &&
                      choices->items.empty() && usage != nullptr &&
                      usage->kind == json::Kind::kObject;
      }
    }
  }
  if (strip_ && forward_ != nullptr) {
    if (!drop_event_) {
      forward_->append(event_raw_);
    }
    event_raw_.clear();
  }
  drop_event_ = false;
  event_data_.clear();
  event_has_data_ = false;
}

void ResponseMeter::Observe(const json::Value& value) {
  if (value.kind != json::Kind::kObject) {
    return;
  }
  const json::Value* type = value.Find("type");
  const std::string_view kind =
      type != nullptr && type->kind == json::Kind::kString ? std::string_view(type->text) : "";
  if (kind == "message_start") {
    // Anthropic: input (plus cache) tokens arrive first; output is cumulative in message_delta.
    if (const json::Value* usage = value.At({"message", "usage"});
        usage != nullptr && usage->kind == json::Kind::kObject) {
      anthropic_started_ = true;
      anthropic_input_ = UintOr(usage->Find("input_tokens"), 0);
      anthropic_cache_create_ = UintOr(usage->Find("cache_creation_input_tokens"), 0);
      anthropic_cache_read_ = UintOr(usage->Find("cache_read_input_tokens"), 0);
      usage_.input =
          SaturatingSum({anthropic_input_, anthropic_cache_create_, anthropic_cache_read_});
      usage_.output = UintOr(usage->Find("output_tokens"), 0);
    }
    return;
  }
  if (kind == "response.completed" || kind == "response.incomplete" || kind == "response.failed" ||
      kind == "response.done") {
    if (const json::Value* usage = value.At({"response", "usage"});
        usage != nullptr && usage->kind == json::Kind::kObject) {
      ObserveUsageObject(*usage);
    }
    return;
  }
  if (const json::Value* usage = value.Find("usage");
      usage != nullptr && usage->kind == json::Kind::kObject) {
    ObserveUsageObject(*usage);
  }
}

void ResponseMeter::ObserveUsageObject(const json::Value& usage) {
  // OpenAI chat completions.
  const json::Value* prompt = usage.Find("prompt_tokens");
  const json::Value* completion = usage.Find("completion_tokens");
  if (prompt != nullptr || completion != nullptr) {
    if (Tokens(prompt) && Tokens(completion)) {
      usage_ = TokenUsage{*Tokens(prompt), *Tokens(completion)};
      known_ = true;
    }
    return;
  }
  const json::Value* input = usage.Find("input_tokens");
  const json::Value* output = usage.Find("output_tokens");
  if (anthropic_started_) {
    // Anthropic message_delta: cumulative counts — overwrite what is present, never add.
    anthropic_input_ = UintOr(input, anthropic_input_);
    anthropic_cache_create_ =
        UintOr(usage.Find("cache_creation_input_tokens"), anthropic_cache_create_);
    anthropic_cache_read_ = UintOr(usage.Find("cache_read_input_tokens"), anthropic_cache_read_);
    usage_.input =
        SaturatingSum({anthropic_input_, anthropic_cache_create_, anthropic_cache_read_});
    if (Tokens(output)) {
      usage_.output = *Tokens(output);
      known_ = true;
    }
    return;
  }
  // OpenAI Responses (input_tokens_details is a breakdown, not an addition) or a whole
  // Anthropic message (cache tokens are billed on top of input_tokens).
  if (Tokens(input) && Tokens(output)) {
    usage_.input =
        SaturatingSum({*Tokens(input), UintOr(usage.Find("cache_creation_input_tokens"), 0),
                       UintOr(usage.Find("cache_read_input_tokens"), 0)});
    usage_.output = *Tokens(output);
    known_ = true;
  }
}

ResponseMeter::Outcome ResponseMeter::outcome() const {
  if (!metered_) {
    return Outcome::kNotMetered;
  }
  if (known_) {
    return Outcome::kKnown;
  }
  return shape_ == ApiShape::kOther ? Outcome::kNotMetered : Outcome::kUnknown;
}

}  // namespace ktesio::daemon::metering
