// The metering proxy's understanding of model traffic: request rewriting, usage extraction from
// JSON and SSE bodies in every provider format, stripping, and byte-exact relaying.

#include "metering/usage_extract.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "ktesio/contract/json.h"

namespace ktesio::daemon::metering {
namespace {

using Outcome = ResponseMeter::Outcome;

// Feeds `body` in pieces of `step` bytes; returns what would be forwarded.
std::string Meter(ResponseMeter& meter, std::string_view body, size_t step, bool complete = true) {
  std::string forwarded;
  for (size_t at = 0; at < body.size(); at += step) {
    meter.Feed(body.substr(at, step), forwarded);
  }
  meter.Finish(complete, forwarded);
  return forwarded;
}

TEST(JsonTest, ParsesAndRejects) {
  std::optional<json::Value> v =
      json::Parse(R"( {"a":[1,2,{"b":"x\u00e9\ud83d\ude00"}],"n":null} )");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->Find("a")->items.size(), 3u);
  EXPECT_EQ(v->Find("a")->items[2].Find("b")->text, "x\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(v->Find("n")->IsNull());
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "01", "1.", "\"\\x\"", "{\"a\" 1}",
                          "\"\\ud800\"", "tru", "1 2", "\"a\nb\""}) {
    EXPECT_FALSE(json::Parse(bad).has_value()) << bad;
  }
  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_FALSE(json::Parse(deep).has_value()) << "depth limit";
  EXPECT_EQ(json::Parse("18446744073709551615")->AsUint(), UINT64_MAX);
  EXPECT_FALSE(json::Parse("18446744073709551616")->AsUint().has_value());
  EXPECT_FALSE(json::Parse("-1")->AsUint().has_value());
  EXPECT_FALSE(json::Parse("1.5")->AsUint().has_value());
}

// The pieces of a JSON string literal for `decoded`, one per character: quotes and backslashes
// escaped, a newline as \n, other control characters as \u escapes.
std::vector<std::string> Escaped(std::string_view decoded) {
  std::vector<std::string> pieces;
  for (const char c : decoded) {
    if (c == '"' || c == '\\') {
      pieces.push_back(std::string("\\") + c);
    } else if (c == '\n') {
      pieces.emplace_back("\\n");
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      pieces.emplace_back(escape);
    } else {
      pieces.emplace_back(1, c);
    }
  }
  return pieces;
}

std::string Quoted(const std::vector<std::string>& pieces) {
  std::string out = "\"";
  for (const std::string& piece : pieces) {
    out += piece;
  }
  return out + "\"";
}

TEST(JsonTest, StringsDecodeExactlyWhereverTheirEscapesFall) {
  // Runs of plain bytes are copied sixteen at a time: escapes, quotes and control bytes at every
  // offset around those steps must decode (or be refused) as one byte at a time would.
  std::mt19937 random(7);
  const std::string alphabet = std::string("ab\"\\\n\t\x01\x1f \x7f", 11) + "\xc3\xa9";
  for (int round = 0; round < 3000; ++round) {
    std::string decoded;
    const size_t length = random() % 48;
    for (size_t i = 0; i < length; ++i) {
      decoded += random() % 4 == 0 ? alphabet[random() % alphabet.size()] : 'x';
    }
    std::vector<std::string> pieces = Escaped(decoded);
    const std::string literal = Quoted(pieces);
    std::optional<json::Value> value = json::Parse(literal);
    ASSERT_TRUE(value.has_value()) << literal;
    EXPECT_EQ(value->text, decoded) << literal;
    EXPECT_EQ(value->end, literal.size());
    // A raw control byte between any two characters is refused as one, at any offset.
    pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(random() % (pieces.size() + 1)),
                  std::string(1, static_cast<char>(random() % 0x20)));
    const std::string raw = Quoted(pieces);
    std::string ignored;
    size_t pos = 0;
    EXPECT_EQ(json::DecodeString(raw, pos, ignored), "control character in string") << raw;
    EXPECT_FALSE(json::Parse(raw).has_value()) << raw;
    EXPECT_FALSE(json::ParseShallow("{\"k\":[" + raw + "]}").has_value()) << raw;  // skipped
  }
  std::string error_out;
  size_t pos = 0;
  EXPECT_EQ(json::DecodeString("\"0123456789abcdef0123\"", pos, error_out), "");
  EXPECT_EQ(error_out, "0123456789abcdef0123");
  pos = 0;
  EXPECT_EQ(json::DecodeString("\"0123456789abcdef0123", pos, error_out), "unterminated string");
  pos = 0;
  EXPECT_EQ(json::DecodeString("\"0123456789abcdef\\", pos, error_out), "unterminated string");
}

// Strings below the top level are validated without being decoded, 64 bytes at a time, each
// block's escapes stepped over from its bits. Whatever the bytes and wherever an escape, quote or
// control byte falls (across a block's end too, as a surrogate pair's second half may), a
// skipped string is accepted exactly when decoding it succeeds, and ends where the decoded one
// does.
TEST(JsonTest, SkippedStringsAreJudgedAsDecodedOnesWhereverTheirBytesFall) {
  std::mt19937 random(11);
  // Well-formed pieces (plain bytes most of all, so that blocks hold several pieces): simple
  // escapes, \u escapes and a surrogate pair, DEL and UTF-8 bytes.
  const std::vector<std::string> good = {"a",    "a",       "a",       "a",
                                         "a",    "a",       "\\\"",    "\\\\",
                                         "\\n",  "\\/",     "\\u00e9", "\\ud83d\\ude00",
                                         "\x7f", "\xc3\xa9"};
  // At most one of these in a string: each half of a pair alone, a bad hex digit, a \u cut short,
  // an unknown escape, a backslash before whatever piece follows, a bare quote (an early end),
  // control bytes.
  const std::vector<std::string> bad = {"\\ud83d", "\\ude00", "\\u12G4", "\\u12", "\\x",
                                        "\\",      "\"",      "\x01",    "\x1f"};
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::string> chosen;
    const size_t count = 1 + random() % 120;
    for (size_t i = 0; i < count; ++i) {
      chosen.push_back(good[random() % good.size()]);
    }
    if (random() % 2 == 0) {
      chosen[random() % count] = bad[random() % bad.size()];
    }
    std::string literal = "\"";
    for (const std::string& piece : chosen) {
      literal += piece;
    }
    if (random() % 8 != 0) {
      literal += '"';
    }
    size_t end = 0;
    std::string decoded;
    const bool decodes = json::DecodeString(literal, end, decoded).empty();
    // As a whole: the full parse decodes the string, the shallow one skips it.
    const std::string doc = "{\"k\":[" + literal + "]}";
    EXPECT_EQ(json::ParseShallow(doc).has_value(), json::Parse(doc).has_value()) << literal;
    if (!decodes) {
      continue;
    }
    // Cut where decoding ended: the skipped string ends there too.
    const std::string cut = "{\"k\":[" + literal.substr(0, end) + "]}";
    std::optional<json::Value> shallow = json::ParseShallow(cut);
    ASSERT_TRUE(shallow.has_value()) << literal;
    EXPECT_EQ(shallow->Find("k")->end, cut.size() - 1) << literal;
    ++accepted;
  }
  EXPECT_GT(accepted, 5000);  // well-formed strings of every length are most of the cases
}

// The texts the shallow parsers are held to: the known bad ones, the depth limit (64 below the
// root) reached in the built top and in skipped members alike, and every one-byte corruption of
// `doc`.
std::string Nested(int levels) {
  return std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']');
}

std::vector<std::string> ShallowCorpus(const std::string& doc) {
  std::vector<std::string> texts = {"",
                                    "{",
                                    "{\"a\":}",
                                    "[1,]",
                                    "01",
                                    "1.",
                                    "\"\\x\"",
                                    "{\"a\" 1}",
                                    "\"\\ud800\"",
                                    "tru",
                                    "1 2",
                                    "\"a\nb\"",
                                    "{\"a\":[1,{\"b\":[}]}",
                                    "[[[[]]]]",
                                    "{\"a\":{\"b\":\"\\q\"}}"};
  for (const int levels : {64, 65, 66}) {
    texts.push_back(Nested(levels));
    texts.push_back("{\"a\":" + Nested(levels - 1) + "}");
    texts.push_back("{\"a\":" + Nested(levels) + "}");
  }
  const std::string replacements = "{}[]\",:0 \\tn-e\x01";
  for (size_t at = 0; at < doc.size(); ++at) {
    for (const char c : replacements) {
      std::string corrupt = doc;
      corrupt[at] = c;
      texts.push_back(corrupt);
    }
  }
  return texts;
}

// A document of every kind of member, escapes and nesting.
constexpr std::string_view kShallowDoc =
    R"( {"model":"m","stream":true,"n":-1.5e3,"messages":[{"role":"user","content":"a\"b"}],)"
    R"("stream_options":{"include_usage":false},"tags":[],"o":{},"x":null,"s":"\u00e9"} )";

TEST(JsonTest, ShallowParsingAcceptsWhatParsingAcceptsAndBuildsOnlyTheTop) {
  const std::string doc(kShallowDoc);
  std::optional<json::Value> full = json::Parse(doc);
  std::optional<json::Value> shallow = json::ParseShallow(doc);
  ASSERT_TRUE(full.has_value());
  ASSERT_TRUE(shallow.has_value());
  ASSERT_EQ(shallow->members.size(), full->members.size());
  for (size_t i = 0; i < full->members.size(); ++i) {
    const json::Member& a = full->members[i];
    const json::Member& b = shallow->members[i];
    EXPECT_EQ(b.key, a.key);
    EXPECT_EQ(b.value.kind, a.value.kind) << a.key;
    EXPECT_EQ(b.value.begin, a.value.begin) << a.key;
    EXPECT_EQ(b.value.end, a.value.end) << a.key;
    EXPECT_EQ(b.value.boolean, a.value.boolean) << a.key;
    if (a.value.kind == json::Kind::kString || a.value.kind == json::Kind::kNumber) {
      EXPECT_EQ(b.value.text, a.value.text) << a.key;
    }
    EXPECT_TRUE(b.value.members.empty() && b.value.items.empty()) << a.key << " was built";
  }
  EXPECT_EQ(full->Find("messages")->items.size(), 1u);
  EXPECT_EQ(shallow->Find("s")->text, "\xc3\xa9");

  // The same verdict as Parse on every text: the known bad ones, the depth limit, and every
  // one-byte corruption of the document above.
  EXPECT_TRUE(json::Parse(Nested(65)).has_value());
  EXPECT_FALSE(json::Parse(Nested(66)).has_value());
  const std::vector<std::string> texts = ShallowCorpus(doc);
  for (const std::string& text : texts) {
    EXPECT_EQ(json::ParseShallow(text).has_value(), json::Parse(text).has_value()) << text;
  }
}

// Whether two shallow parses are the same: verdict, spans, the root's members and their values.
::testing::AssertionResult SameShallow(const std::optional<json::Value>& a,
                                       const std::optional<json::Value>& b) {
  if (a.has_value() != b.has_value()) {
    return ::testing::AssertionFailure() << "one parsed, the other did not";
  }
  if (!a.has_value()) {
    return ::testing::AssertionSuccess();
  }
  const auto same_value = [](const json::Value& x, const json::Value& y) {
    return x.kind == y.kind && x.boolean == y.boolean && x.text == y.text && x.begin == y.begin &&
           x.end == y.end && x.members.empty() == y.members.empty() &&
           x.items.empty() == y.items.empty();
  };
  if (!same_value(*a, *b) || a->members.size() != b->members.size() ||
      a->items.size() != b->items.size()) {
    return ::testing::AssertionFailure() << "the roots differ";
  }
  for (size_t i = 0; i < a->members.size(); ++i) {
    if (a->members[i].key != b->members[i].key ||
        !same_value(a->members[i].value, b->members[i].value)) {
      return ::testing::AssertionFailure() << "member " << i << " differs";
    }
  }
  for (size_t i = 0; i < a->items.size(); ++i) {
    if (!same_value(a->items[i], b->items[i])) {
      return ::testing::AssertionFailure() << "item " << i << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

// ShallowScanner fed `text` in pieces of `step` bytes (the last may be shorter), into a buffer
// that moves as it grows, as the proxy's body does.
std::optional<json::Value> ScanInPieces(std::string_view text, size_t step) {
  json::ShallowScanner scanner;
  std::string arrived;
  for (size_t at = 0; at < text.size(); at += step) {
    std::string grown = arrived;  // a new place, the same bytes
    grown.append(text.substr(at, step));
    arrived = std::move(grown);
    scanner.Advance(arrived);
  }
  return scanner.Finish(text);
}

TEST(JsonTest, TheScannerParsesAsShallowParsingDoesHoweverTheTextArrives) {
  std::vector<std::string> texts = ShallowCorpus(std::string(kShallowDoc));
  // What a split could break: every escape (a surrogate pair is twelve bytes), numbers and
  // literals that could go on, keys and string values of the root, whitespace everywhere, a
  // long string crossing the scanner's 64-byte blocks, and a text that ends too soon.
  const std::string long_text(150, 'x');
  for (const std::string& text : std::vector<std::string>{
           R"({"a":"\uD83D\uDE00\n\"\\\/\b\f\r\t\u00e9","b":-0.5e+10,"c":[true,false,null,0]})",
           R"({ "k\u0065y" : "v" , "n" : 12 , "t" : true , "f" : false , "z" : null } )",
           R"({"s":")" + long_text + R"(\uD83D\uDE00)" + long_text + R"(\n"})",
           R"({"s":")" + long_text + R"(\uD83D)" + long_text + R"("})",
           R"({"s":")" + long_text + R"(\q"})",
           R"({"n":1)",
           R"({"n":1e})",
           R"({"n":-})",
           R"({"t":tru})",
           R"({"a":1}{)",
           R"({"a":1} x)",
           R"({"a":{"b":[1,2,{"c":"d"}]},"e":"f"})",
           R"({"stream":true,"stream":false})",
           R"({"a":"\u12"})",
           "{\"a\":\"b\x01\"}",
           "  {}  ",
           "[1,2]",
           "\"s\"",
       }) {
    texts.push_back(text);
  }
  size_t parsed = 0;
  for (const std::string& text : texts) {
    const std::optional<json::Value> expected = json::ParseShallow(text);
    parsed += expected.has_value() ? 1 : 0;
    for (const size_t step :
         {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{13}, size_t{64}, text.size() + 1}) {
      EXPECT_TRUE(SameShallow(ScanInPieces(text, step), expected))
          << "text " << text << " in pieces of " << step;
    }
  }
  EXPECT_GT(parsed, 20u);  // the valid texts are not a handful among the corrupt ones
  // Each byte is looked at about once however the text is cut: a 1 MiB number trickled a byte at
  // a time (one Advance per byte, as a client trickling its body makes the proxy do) is read in
  // milliseconds. Read from its first digit at every piece, it took minutes, past this test's
  // time limit.
  {
    const std::string number = R"({"stream":true,"n":1)" + std::string(1u << 20, '0') + "}";
    json::ShallowScanner trickled;
    for (size_t at = 1; at < number.size(); ++at) {
      trickled.Advance(std::string_view(number).substr(0, at));
    }
    const std::optional<json::Value> root = trickled.Finish(number);
    ASSERT_TRUE(root.has_value());
    EXPECT_EQ(root->Find("n")->text.size(), (1u << 20) + 1);
  }
  // A malformed text is known as such once its fault has arrived.
  json::ShallowScanner scanner;
  scanner.Advance(R"({"a":[1,}, "b":)");
  EXPECT_TRUE(scanner.failed());
}

TEST(ShapeTest, ByPath) {
  EXPECT_EQ(ShapeOfTarget("/v1/chat/completions"), ApiShape::kChatCompletions);
  EXPECT_EQ(ShapeOfTarget("/chat/completions?api-version=1"), ApiShape::kChatCompletions);
  EXPECT_EQ(ShapeOfTarget("/v1/responses"), ApiShape::kResponses);
  EXPECT_EQ(ShapeOfTarget("/v1/messages/"), ApiShape::kAnthropicMessages);
  EXPECT_EQ(ShapeOfTarget("/v1/threads/t1/messages"), ApiShape::kOther);
  EXPECT_EQ(ShapeOfTarget("/v1/models"), ApiShape::kOther);
}

TEST(PlanRequestTest, InjectsIncludeUsageOnlyWhenTheClientDidNotAsk) {
  struct Case {
    std::string body;
    std::optional<std::string> rewritten;
  };
  const Case cases[] = {
      {R"({"model":"m","stream":true})",
       R"({"stream_options":{"include_usage":true},"model":"m","stream":true})"},
      {R"({"stream":true,"stream_options":null})",
       R"({"stream":true,"stream_options":{"include_usage":true}})"},
      {R"({"stream":true,"stream_options":{}})",
       R"({"stream":true,"stream_options":{"include_usage":true}})"},
      {R"({"stream":true,"stream_options":{"x":1}})",
       R"({"stream":true,"stream_options":{"include_usage":true,"x":1}})"},
      {R"({"stream":true,"stream_options":{"include_usage":false}})",
       R"({"stream":true,"stream_options":{"include_usage":true}})"},
      {R"({"stream":true,"stream_options":{"include_usage":true}})", std::nullopt},
      {R"({"stream":false})", std::nullopt},
      {R"({"model":"m"})", std::nullopt},
      {R"(not json)", std::nullopt},
      {R"({"stream":true,"stream_options":7})", std::nullopt},
      {R"({"stream":true,"stream_options":{"include_usage":null}})",
       R"({"stream":true,"stream_options":{"include_usage":true}})"},
      // Neither a yes nor a no: relayed as sent (the provider judges the type), never made a yes.
      {R"({"stream":true,"stream_options":{"include_usage":1}})", std::nullopt},
      {R"({"stream":true,"stream_options":{"include_usage":"true"}})", std::nullopt},
      {R"({"stream":true,"stream_options":{"include_usage":{}}})", std::nullopt},
  };
  for (const Case& c : cases) {
    RequestPlan plan = PlanRequest("POST", "/v1/chat/completions", c.body);
    EXPECT_EQ(plan.shape, ApiShape::kChatCompletions);
    const std::optional<std::string> rewritten =
        plan.edit ? std::optional(plan.edit->Apply(c.body)) : std::nullopt;
    EXPECT_EQ(rewritten, c.rewritten) << c.body;
    if (rewritten) {
      EXPECT_TRUE(json::Parse(*rewritten).has_value()) << *rewritten;
      EXPECT_EQ(plan.edit->EditedSize(c.body.size()), rewritten->size());
    }
  }
  // Other shapes and methods are never rewritten.
  EXPECT_FALSE(PlanRequest("POST", "/v1/responses", R"({"stream":true})").edit.has_value());
  EXPECT_EQ(PlanRequest("GET", "/v1/chat/completions", "").shape, ApiShape::kOther);
}

// A JSON call is planned without a parse when its body never says "stream" nor escapes a lowercase
// letter (a key can be spelled so). The search tests 32 places at a time (where the processor has
// AVX2), then sixteen, for the needle's quote, 's' and 'm', and for an escape's '\' and '0', before
// comparing one whole: the needles and look-alikes that share those bytes, at every offset of
// bodies of every length around those steps (up to six 32-byte blocks, so that each search hands
// over to the next with a tail left), must get the answer a plain search gives. Each body sits in a
// buffer of its exact size, so that reading past its end is a fault under the address sanitizer.
TEST(PlanRequestTest, TheStreamKeyIsFoundWhereverItFalls) {
  std::mt19937 random(5);
  const std::string filler = "\"sm \\tu067";
  const std::vector<std::string> pieces = {"\"stream\"", "\"streaM\"", "\"sxxxxm\"", "\"stream",
                                           "stream\"",   "\"sxxxxm",   "\\u0073",    "\\u006d",
                                           "\\u0053",    "\\u001b",    "\\u00e9",    "\\u2014",
                                           "\\u00",      "\\u007",     "\\u0"};
  const auto reference = [](std::string_view body) {
    if (body.find("\"stream\"") != std::string_view::npos) {
      return true;
    }
    for (size_t at = 0; at + 4 < body.size(); ++at) {
      if (body.substr(at, 4) == "\\u00" && (body[at + 4] == '6' || body[at + 4] == '7')) {
        return true;
      }
    }
    return false;
  };
  int found = 0;
  for (int round = 0; round < 40000; ++round) {
    std::string text;
    const size_t length = random() % 200;
    for (size_t i = 0; i < length; ++i) {
      text += random() % 2 == 0 ? filler[random() % filler.size()] : 'x';
    }
    if (random() % 2 == 0) {
      text.insert(random() % (text.size() + 1), pieces[random() % pieces.size()]);
    }
    const std::unique_ptr<char[]> exact(new char[text.size()]);
    std::memcpy(exact.get(), text.data(), text.size());
    const std::string_view body(exact.get(), text.size());
    const bool expected = reference(body);
    EXPECT_EQ(MentionsStream(body), expected) << body;
    found += expected ? 1 : 0;
  }
  EXPECT_GT(found, 2000);
}

// Every place of every 32-byte block and of the tails after them: the needle, an escaped letter and
// a look-alike of each at every offset of bodies of 38 to 110 bytes (the wide search needs 39 to
// start, the narrow one 23), each in a buffer of its exact size.
TEST(PlanRequestTest, TheStreamKeyIsFoundAtEveryOffsetAcrossTheSearchSteps) {
  const std::vector<std::pair<std::string, bool>> pieces = {
      {"\"stream\"", true}, {"\\u0061", true}, {"\"streak\"", false}, {"\\u0041", false}};
  for (size_t length = 38; length <= 110; ++length) {
    for (const auto& [piece, mentions] : pieces) {
      for (size_t at = 0; at + piece.size() <= length; ++at) {
        std::string text(length, 'x');
        text.replace(at, piece.size(), piece);
        const std::unique_ptr<char[]> exact(new char[text.size()]);
        std::memcpy(exact.get(), text.data(), text.size());
        EXPECT_EQ(MentionsStream(std::string_view(exact.get(), text.size())), mentions) << text;
      }
    }
  }
}

// A key spelled with escapes is the key: a body that asks for a stream so gets include_usage
// asked for like any other (were it taken for a JSON call, the usage would go unasked and the
// call count as unknown usage, which no budget sees).
TEST(PlanRequestTest, AnEscapedStreamKeyIsAStream) {
  const std::string body = R"({"model":"m","stre\u0061m":true,"messages":[]})";
  const RequestPlan plan = PlanRequest("POST", "/v1/chat/completions", body);
  EXPECT_TRUE(plan.streaming);
  ASSERT_TRUE(plan.edit.has_value());
  EXPECT_EQ(plan.edit->Apply(body),
            R"({"stream_options":{"include_usage":true},"model":"m","stre\u0061m":true,)"
            R"("messages":[]})");
  EXPECT_EQ(plan.model, "m");
  // An escaped letter elsewhere asks for nothing: the body is parsed, and planned as a JSON call.
  const RequestPlan json_call = PlanRequest("POST", "/v1/chat/completions",
                                            R"({"model":"m","messages":[{"content":"\u0061"}]})");
  EXPECT_FALSE(json_call.streaming);
  EXPECT_FALSE(json_call.edit.has_value());
  EXPECT_EQ(json_call.model, "m");
}

TEST(PlanRequestTest, APlanMadeAsTheBodyArrivesIsThePlanOfTheWholeBody) {
  const std::string long_text(300, 'x');
  const std::vector<std::string> bodies = {
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" + long_text +
          R"("}]})",
      R"({"messages":[{"role":"user","content":")" + long_text +
          R"("}],"model":"m","stream":true})",
      R"({"messages":[],"model":"m","stream":true,"stream_options":null})",
      R"({"messages":[],"model":"m","stream":true,"stream_options":{"include_usage":false}})",
      R"({"messages":[],"model":"m","stream":true,"stream_options":{"include_usage":true}})",
      R"({"model":"m","messages":[{"role":"user","content":")" + long_text + R"("}]})",
      R"({"messages":[],"model":"m","stream":false})",
      R"({"messages":[],"model":"m","str\u0065am":true})",
      R"({"model":"m","stream":true,"messages":[)",  // never whole: relayed untouched
      R"({"model":"m","stream":true,"messages":[1,]})",
      R"([{"stream":true}])",
  };
  const std::vector<std::string_view> targets = {"/v1/chat/completions", "/v1/responses",
                                                 "/v1/messages", "/v1/models"};
  size_t edited = 0;
  for (const std::string& body : bodies) {
    for (const std::string_view target : targets) {
      const RequestPlan whole = PlanRequest("POST", target, body);
      edited += whole.edit.has_value() ? 1 : 0;
      for (const size_t step : {size_t{1}, size_t{5}, size_t{64}}) {
        RequestPlanner planner("POST", target);
        for (size_t at = step; at < body.size(); at += step) {
          planner.Arrived(std::string_view(body).substr(0, at));
        }
        const RequestPlan plan = planner.Finish(body);
        EXPECT_EQ(plan.shape, whole.shape) << body;
        EXPECT_EQ(plan.streaming, whole.streaming) << body;
        EXPECT_EQ(plan.model, whole.model) << body;
        ASSERT_EQ(plan.edit.has_value(), whole.edit.has_value()) << body << " at " << target;
        if (whole.edit.has_value()) {
          EXPECT_EQ(plan.edit->Apply(body), whole.edit->Apply(body)) << body;
        }
      }
    }
  }
  EXPECT_EQ(edited, 5u);  // include_usage is added to the chat completions that stream
  // Not a POST: nothing is planned, however the body arrives.
  RequestPlanner get("GET", "/v1/chat/completions");
  get.Arrived(bodies[0]);
  EXPECT_EQ(get.Finish(bodies[0]).shape, ApiShape::kOther);
}

TEST(PlanRequestTest, TheRequestModelWhenItIsKnown) {
  struct Case {
    std::string body;
    std::string model;
  };
  const std::string history(70000, 'x');
  const Case cases[] = {
      {R"({"model":"gpt-4o","messages":[]})", "gpt-4o"},           // leading: not parsed
      {R"( { "model" : "gpt-4o" , "stream" : true })", "gpt-4o"},  // streamed: parsed
      {R"({"messages":[{"content":"\"model\":\"no\""}],"model":"m2"})", "m2"},  // after the rest
      {R"({"model":"gpt\u002d4","messages":[]})", "gpt-4"},                     // escapes decoded
      {R"({"model":"a","model":"b"})", "a"},                                    // leading one wins
      {R"({"messages":[],"model":"a","model":"b"})", "b"},                      // as Find: the last
      {R"({"model":7,"messages":[]})", ""},                                     // not a string
      {R"({"model":"tab\there"})", ""},                                // a control character
      {"{\"model\":\"gpt\xff\"}", ""},                                 // not UTF-8 (raw byte)
      {"{\"model\":\"gpt\xc3\xa9\",\"stream\":true}", "gpt\xc3\xa9"},  // UTF-8, parsed path
      {R"({"model":"\ud800"})", ""},                                   // an escaped lone surrogate
      {R"({"model":")" + std::string(129, 'm') + R"("})", ""},         // too long for a label
      {R"({"model":")" + std::string(128, 'm') + R"("})", std::string(128, 'm')},
      {R"({"messages":[)", ""},  // not JSON
      {R"({"messages":[{"content":")" + history + R"("}],"model":"late"})", "late"},
      {"[]", ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PlanRequest("POST", "/v1/chat/completions", c.body).model, c.model)
        << c.body.substr(0, 120);
  }
  EXPECT_EQ(PlanRequest("POST", "/v1/messages", R"({"model":"claude"})").model, "claude");
  // Only a chat completion's body is looked into for "stream": of another shape's, a leading model
  // is read alone (the rest is the provider's to judge), a later one found by the parse.
  const RequestPlan responses =
      PlanRequest("POST", "/v1/responses", R"({"model":"gpt-5","stream":true,"input":[)");
  EXPECT_EQ(responses.model, "gpt-5");
  EXPECT_FALSE(responses.streaming);
  EXPECT_FALSE(responses.edit.has_value());
  EXPECT_EQ(PlanRequest("POST", "/v1/messages", R"({"stream":true,"model":"claude"})").model,
            "claude");
  EXPECT_EQ(
      PlanRequest("POST", "/v1/chat/completions", R"({"model":"m","stream":true,"x":[)").model, "")
      << "a chat completion that may stream is parsed whole, and this one is not JSON";
  EXPECT_EQ(PlanRequest("POST", "/v1/files", R"({"model":"x"})").model, "");  // no model call
  EXPECT_EQ(PlanRequest("GET", "/v1/chat/completions", R"({"model":"x"})").model, "");
}

TEST(ResponseMeterTest, JsonBodiesOfEveryFormat) {
  struct Case {
    ApiShape shape;
    std::string body;
    Outcome outcome;
    TokenUsage usage;
  };
  const Case cases[] = {
      {ApiShape::kChatCompletions,
       R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})",
       Outcome::kKnown,
       {12, 5}},
      {ApiShape::kResponses,
       R"({"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":4}})",
       Outcome::kKnown,
       {30, 4}},
      {ApiShape::kAnthropicMessages,
       R"({"usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":7}})",
       Outcome::kKnown,
       {17, 7}},
      {ApiShape::kChatCompletions, R"({"choices":[]})", Outcome::kUnknown, {}},
      {ApiShape::kChatCompletions, R"({"usage":null})", Outcome::kUnknown, {}},
      {ApiShape::kChatCompletions,
       R"({"usage":{"prompt_tokens":-1,"completion_tokens":2}})",
       Outcome::kUnknown,
       {}},
      {ApiShape::kChatCompletions, R"({"usage":{"prompt_tokens":3}})", Outcome::kUnknown, {}},
      {ApiShape::kChatCompletions, R"({truncated)", Outcome::kUnknown, {}},
      {ApiShape::kOther, R"({"data":[]})", Outcome::kNotMetered, {}},
      {ApiShape::kOther,
       R"({"usage":{"prompt_tokens":1,"completion_tokens":2}})",
       Outcome::kKnown,
       {1, 2}},
  };
  for (const Case& c : cases) {
    ResponseMeter meter(c.shape, false);
    meter.Begin(200, "application/json");
    EXPECT_EQ(Meter(meter, c.body, 7), c.body);
    EXPECT_EQ(meter.outcome(), c.outcome) << c.body;
    if (c.outcome == Outcome::kKnown) {
      EXPECT_EQ(meter.usage(), c.usage) << c.body;
    }
  }
}

TEST(ResponseMeterTest, ErrorsAreNotMeteredAndCutJsonIsUnknown) {
  ResponseMeter error(ApiShape::kChatCompletions, false);
  error.Begin(401, "application/json");
  Meter(error, R"({"error":{"message":"bad key"}})", 100);
  EXPECT_EQ(error.outcome(), Outcome::kNotMetered);

  ResponseMeter cut(ApiShape::kChatCompletions, false);
  cut.Begin(200, "application/json");
  Meter(cut, R"({"usage":{"prompt_tokens":1,"completion_tokens":2}})", 100, /*complete=*/false);
  EXPECT_EQ(cut.outcome(), Outcome::kUnknown);
}

const char kChatStream[] =
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n"
    ": keep-alive comment\n\n"
    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

TEST(ResponseMeterTest, ChatStreamIsRelayedByteForByteAtAnySplit) {
  for (size_t step : {1u, 2u, 5u, 64u, 4096u}) {
    ResponseMeter meter(ApiShape::kChatCompletions, false);
    meter.Begin(200, "text/event-stream; charset=utf-8");
    EXPECT_EQ(Meter(meter, kChatStream, step), kChatStream) << step;
    EXPECT_EQ(meter.outcome(), Outcome::kKnown);
    EXPECT_EQ(meter.usage(), (TokenUsage{9, 3}));
  }
}

TEST(ResponseMeterTest, InjectedUsageChunkIsStrippedAtAnySplitAndCrLf) {
  std::string expected(kChatStream);
  const std::string usage_event =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n";
  expected.erase(expected.find(usage_event), usage_event.size());
  for (size_t step : {1u, 3u, 4096u}) {
    ResponseMeter meter(ApiShape::kChatCompletions, true);
    meter.Begin(200, "text/event-stream");
    EXPECT_EQ(Meter(meter, kChatStream, step), expected) << step;
    EXPECT_EQ(meter.usage(), (TokenUsage{9, 3}));
  }
  std::string crlf;
  for (char c : std::string(kChatStream)) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  ResponseMeter meter(ApiShape::kChatCompletions, true);
  meter.Begin(200, "text/event-stream");
  const std::string out = Meter(meter, crlf, 2);
  EXPECT_EQ(out.find("prompt_tokens"), std::string::npos);
  EXPECT_NE(out.find("[DONE]"), std::string::npos);
  EXPECT_EQ(meter.usage(), (TokenUsage{9, 3}));
}

TEST(ResponseMeterTest, TheUsageKeyIsFoundWhereverItAndLookalikesSit) {
  struct Case {
    std::string data;
    std::optional<TokenUsage> usage;
  };
  const Case cases[] = {
      // Lookalikes first ("g" everywhere, the key as a value, a null usage), then the real one.
      {R"({"a":"ggg","b":"usage","usage":null,"usage" : {"prompt_tokens":1,"completion_tokens":2}})",
       TokenUsage{1, 2}},
      {R"({"usage":{"prompt_tokens":3,"completion_tokens":4}})", TokenUsage{3, 4}},
      {R"({"x":"usag","y":"g"})", std::nullopt},
      {R"({"usage":"g"})", std::nullopt},
      {"g", std::nullopt},
      {"\"usage\"", std::nullopt},
  };
  for (const Case& c : cases) {
    ResponseMeter meter(ApiShape::kChatCompletions, false);
    meter.Begin(200, "text/event-stream");
    const std::string stream = "data: " + c.data + "\n\n";
    EXPECT_EQ(Meter(meter, stream, 3), stream) << c.data;
    EXPECT_EQ(meter.outcome() == Outcome::kKnown, c.usage.has_value()) << c.data;
    if (c.usage.has_value()) {
      EXPECT_EQ(meter.usage(), *c.usage) << c.data;
    }
  }
}

TEST(ResponseMeterTest, AResetMeterMetersTheNextResponseAsANewOneWould) {
  std::string expected(kChatStream);
  const std::string usage_event =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n";
  expected.erase(expected.find(usage_event), usage_event.size());
  ResponseMeter meter(ApiShape::kAnthropicMessages, false);
  // A first response cut mid-event, with a partial line, held bytes and Anthropic state behind.
  meter.Reset(ApiShape::kChatCompletions, true);
  meter.Begin(200, "text/event-stream");
  std::string ignored;
  meter.Feed(std::string(kChatStream).substr(0, 130) + "\r", ignored);
  // Then: a stripped stream, a JSON body, an error and a GET, each as a new meter meters it.
  meter.Reset(ApiShape::kChatCompletions, true);
  meter.Begin(200, "text/event-stream");
  EXPECT_EQ(Meter(meter, kChatStream, 7), expected);
  EXPECT_EQ(meter.outcome(), Outcome::kKnown);
  EXPECT_EQ(meter.usage(), (TokenUsage{9, 3}));
  meter.Reset(ApiShape::kChatCompletions, false);
  meter.Begin(200, "application/json");
  const std::string json = R"({"usage":{"prompt_tokens":4,"completion_tokens":2}})";
  EXPECT_EQ(Meter(meter, json, 5), json);
  EXPECT_EQ(meter.usage(), (TokenUsage{4, 2}));
  meter.Reset(ApiShape::kChatCompletions, false);
  meter.Begin(500, "application/json");
  EXPECT_EQ(Meter(meter, json, 64), json);
  EXPECT_EQ(meter.outcome(), Outcome::kNotMetered);
  meter.Reset(ApiShape::kChatCompletions, false, false);
  meter.Begin(200, "application/json");
  EXPECT_EQ(Meter(meter, json, 64), json);
  EXPECT_EQ(meter.outcome(), Outcome::kNotMetered);
  EXPECT_FALSE(meter.streaming());
  // A cut JSON body leaves usage unknown, and the next reset forgets that too.
  meter.Reset(ApiShape::kChatCompletions, false);
  meter.Begin(200, "application/json");
  EXPECT_EQ(Meter(meter, json.substr(0, 20), 64, false), json.substr(0, 20));
  EXPECT_EQ(meter.outcome(), Outcome::kUnknown);
  meter.Reset(ApiShape::kChatCompletions, false);
  meter.Begin(200, "application/json");
  EXPECT_EQ(Meter(meter, json, 64), json);
  EXPECT_EQ(meter.outcome(), Outcome::kKnown);
  // Small buffers are kept for the next response; one grown by a large body is released.
  meter.Reset(ApiShape::kChatCompletions, false);
  meter.Begin(200, "application/json");
  std::string forwarded;
  meter.Feed(json, forwarded);
  const size_t small = meter.held_capacity();
  EXPECT_GE(small, json.size());
  meter.Reset(ApiShape::kChatCompletions, false);
  EXPECT_EQ(meter.held_capacity(), small);
  const std::string large = R"({"pad":")" + std::string(1 << 20, 'x') + R"("})";
  meter.Begin(200, "application/json");
  meter.Feed(large, forwarded);
  EXPECT_GE(meter.held_capacity(), large.size());
  meter.Reset(ApiShape::kChatCompletions, false);
  EXPECT_LT(meter.held_capacity(), ResponseMeter::kKeptCapacity);
}

TEST(ResponseMeterTest, EveryLineEndingSseAllowsEndsALineWhereverThePiecesSplit) {
  for (const std::string ending : {"\n", "\r\n", "\r"}) {
    std::string stream;
    for (char c : std::string(kChatStream)) {
      stream += c == '\n' ? ending : std::string(1, c);
    }
    for (size_t step : {size_t{1}, size_t{7}, stream.size()}) {
      ResponseMeter meter(ApiShape::kChatCompletions, false);
      meter.Begin(200, "text/event-stream");
      EXPECT_EQ(Meter(meter, stream, step), stream) << "step " << step;
      EXPECT_EQ(meter.usage(), (TokenUsage{9, 3})) << "step " << step;
    }
  }
}

TEST(ResponseMeterTest, ChatStreamCutBeforeUsageIsUnknown) {
  const std::string stream(kChatStream);
  ResponseMeter meter(ApiShape::kChatCompletions, false);
  meter.Begin(200, "text/event-stream");
  Meter(meter, stream.substr(0, stream.find("data: {\"choices\":[],")), 16, false);
  EXPECT_EQ(meter.outcome(), Outcome::kUnknown);
}

TEST(ResponseMeterTest, ResponsesApiStream) {
  const std::string stream =
      "event: response.created\ndata: "
      "{\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n"
      "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\"}\n\n"
      "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
      "{\"usage\":{\"input_tokens\":40,\"output_tokens\":8}}}\n\n";
  ResponseMeter meter(ApiShape::kResponses, false);
  meter.Begin(200, "text/event-stream");
  EXPECT_EQ(Meter(meter, stream, 3), stream);
  EXPECT_EQ(meter.outcome(), Outcome::kKnown);
  EXPECT_EQ(meter.usage(), (TokenUsage{40, 8}));

  ResponseMeter cut(ApiShape::kResponses, false);
  cut.Begin(200, "text/event-stream");
  Meter(cut, stream.substr(0, stream.find("event: response.completed")), 3, false);
  EXPECT_EQ(cut.outcome(), Outcome::kUnknown);
}

TEST(ResponseMeterTest, AnthropicStreamOverwritesCumulativeOutput) {
  const std::string stream =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
      "{\"input_tokens\":20,\"cache_read_input_tokens\":6,\"cache_creation_input_tokens\":4,"
      "\"output_tokens\":1}}}\n\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  ResponseMeter meter(ApiShape::kAnthropicMessages, false);
  meter.Begin(200, "text/event-stream");
  EXPECT_EQ(Meter(meter, stream, 11), stream);
  EXPECT_EQ(meter.outcome(), Outcome::kKnown);
  EXPECT_EQ(meter.usage(), (TokenUsage{30, 12})) << "overwrite, never add";

  ResponseMeter started_only(ApiShape::kAnthropicMessages, false);
  started_only.Begin(200, "text/event-stream");
  Meter(started_only, stream.substr(0, stream.find("event: content_block_delta")), 11, false);
  EXPECT_EQ(started_only.outcome(), Outcome::kUnknown) << "output never arrived";
}

TEST(ResponseMeterTest, HostileStreamsNeverCrashAndStayRelayed) {
  const std::string garbage =
      "data: {\"usage\":\ndata: [[[[[[\n\n\r\r\n:::\ndata\n\n" + std::string(1000, '{') + "\n\n";
  ResponseMeter meter(ApiShape::kChatCompletions, false);
  meter.Begin(200, "text/event-stream");
  EXPECT_EQ(Meter(meter, garbage, 13), garbage);
  EXPECT_EQ(meter.outcome(), Outcome::kUnknown);
}

}  // namespace
}  // namespace ktesio::daemon::metering
