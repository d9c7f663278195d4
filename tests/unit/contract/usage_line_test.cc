// ParseUsageLine: the KTESIO_USAGE sentinel grammar.

#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/usage_line.h"

namespace ktesio::contract {
namespace {

struct UsageCase {
  const char* name;
  std::string line;
  UsageReport expected;
};

TEST(UsageLineTest, WellFormedLines) {
  const UsageCase cases[] = {
      {"canonical",
       R"(KTESIO_USAGE {"sequence":0,"input_tokens":128,"output_tokens":512})",
       {0, 128, 512}},
      {"any field order",
       R"(KTESIO_USAGE {"output_tokens":3,"sequence":1,"input_tokens":2})",
       {1, 2, 3}},
      {"json whitespace",
       "KTESIO_USAGE  \t{ \"sequence\" :\n7 ,\r\"input_tokens\":\t0,\"output_tokens\" : 0 }",
       {7, 0, 0}},
      {"tab separator",
       "KTESIO_USAGE\t{\"sequence\":1,\"input_tokens\":1,\"output_tokens\":1}",
       {1, 1, 1}},
      {"trailing CR",
       "KTESIO_USAGE {\"sequence\":1,\"input_tokens\":2,\"output_tokens\":3}\r",
       {1, 2, 3}},
      {"trailing CRLF",
       "KTESIO_USAGE {\"sequence\":1,\"input_tokens\":2,\"output_tokens\":3}\r\n",
       {1, 2, 3}},
      {"surrounding whitespace",
       "  \tKTESIO_USAGE {\"sequence\":1,\"input_tokens\":2,\"output_tokens\":3}  \t ",
       {1, 2, 3}},
      {"u64 max",
       "KTESIO_USAGE {\"sequence\":18446744073709551615,\"input_tokens\":0,\"output_tokens\":0}",
       {std::numeric_limits<std::uint64_t>::max(), 0, 0}},
      {"escaped key",
       R"(KTESIO_USAGE {"\u0073equence":5,"input_tokens":0,"output_tokens":0})",
       {5, 0, 0}},
  };
  for (const UsageCase& c : cases) {
    UsageLineResult result = ParseUsageLine(c.line);
    EXPECT_EQ(result.kind, UsageLineKind::kUsage) << c.name << ": " << result.error;
    EXPECT_EQ(result.report, c.expected) << c.name;
    EXPECT_TRUE(result.error.empty()) << c.name;
  }
}

TEST(UsageLineTest, OrdinaryOutputIsNotUsage) {
  for (const char* line :
       {"", "hello", "   ", "ktesio_usage {}", "KTESIO-USAGE {}", "xKTESIO_USAGE {\"sequence\":1}",
        "USAGE KTESIO_USAGE {}", "KTESIO_USAG {}", "\xff\xfe"}) {
    UsageLineResult result = ParseUsageLine(line);
    EXPECT_EQ(result.kind, UsageLineKind::kNotUsage) << line;
    EXPECT_TRUE(result.error.empty());
  }
}

struct MalformedCase {
  const char* name;
  std::string line;
  const char* error;
};

TEST(UsageLineTest, MalformedPayloadsAreDiagnosed) {
  const std::string p = "KTESIO_USAGE ";
  const MalformedCase cases[] = {
      {"prefix only", "KTESIO_USAGE", "without a payload"},
      {"prefix and spaces", "KTESIO_USAGE   ", "without a payload"},
      {"no separator", "KTESIO_USAGE{\"sequence\":1,\"input_tokens\":1,\"output_tokens\":1}",
       "must be followed by a space or tab"},
      {"suffix glued", "KTESIO_USAGEX {}", "must be followed by a space or tab"},
      {"not an object", p + "[1,2,3]", "must be a JSON object"},
      {"plain text", p + "sequence=1", "must be a JSON object"},
      {"empty object", p + "{}", "missing field \"sequence\""},
      {"missing output", p + R"({"sequence":1,"input_tokens":2})",
       "missing field \"output_tokens\""},
      {"missing input", p + R"({"sequence":1,"output_tokens":2})",
       "missing field \"input_tokens\""},
      {"extra field", p + R"({"sequence":1,"input_tokens":2,"output_tokens":3,"cost":4})",
       "unexpected field \"cost\""},
      {"duplicate", p + R"({"sequence":1,"sequence":2,"input_tokens":2,"output_tokens":3})",
       "duplicate field \"sequence\""},
      {"camel case", p + R"({"sequence":1,"inputTokens":2,"output_tokens":3})",
       "unexpected field \"inputTokens\""},
      {"negative", p + R"({"sequence":-1,"input_tokens":2,"output_tokens":3})",
       "field \"sequence\" must be non-negative"},
      {"fraction", p + R"({"sequence":1.0,"input_tokens":2,"output_tokens":3})",
       "must be an integer (no fraction or exponent)"},
      {"exponent", p + R"({"sequence":1,"input_tokens":1e3,"output_tokens":3})",
       "field \"input_tokens\" must be an integer"},
      {"leading zero", p + R"({"sequence":01,"input_tokens":2,"output_tokens":3})",
       "has a leading zero"},
      {"plus sign", p + R"({"sequence":+1,"input_tokens":2,"output_tokens":3})",
       "found a malformed number"},
      {"string value", p + R"({"sequence":"1","input_tokens":2,"output_tokens":3})",
       "must be a non-negative integer, found a string"},
      {"null", p + R"({"sequence":1,"input_tokens":null,"output_tokens":3})", "found null"},
      {"bool", p + R"({"sequence":1,"input_tokens":2,"output_tokens":true})", "found a boolean"},
      {"nested", p + R"({"sequence":{},"input_tokens":2,"output_tokens":3})",
       "found an object or array"},
      {"overflow", p + R"({"sequence":18446744073709551616,"input_tokens":2,"output_tokens":3})",
       "does not fit in 64 bits"},
      {"trailing garbage", p + R"({"sequence":1,"input_tokens":2,"output_tokens":3} x)",
       "unexpected characters after the JSON object"},
      {"two objects", p + R"({"sequence":1,"input_tokens":2,"output_tokens":3}{})",
       "unexpected characters after the JSON object"},
      {"trailing comma", p + R"({"sequence":1,"input_tokens":2,"output_tokens":3,})",
       "expected a field name in double quotes"},
      {"missing colon", p + R"({"sequence" 1,"input_tokens":2,"output_tokens":3})",
       "expected ':' after \"sequence\""},
      {"missing comma", p + R"({"sequence":1 "input_tokens":2,"output_tokens":3})",
       "expected ',' or '}'"},
      {"unterminated object", p + R"({"sequence":1,"input_tokens":2,"output_tokens":3)",
       "expected ',' or '}'"},
      {"single quotes", p + R"({'sequence':1})", "expected a field name in double quotes"},
      {"unterminated string", p + R"({"sequence)", "unterminated string"},
      {"bad escape", p + R"({"seq\x":1})", "invalid escape"},
      {"bad unicode escape", p + R"({"seq\u00zz":1})", "invalid \\u escape"},
      {"truncated unicode escape", p + R"({"\u00)", "truncated \\u escape"},
      {"lone low surrogate", p + R"({"\udc00":1})", "unpaired surrogate"},
      {"lone high surrogate", p + R"({"\ud800x":1})", "unpaired surrogate"},
      {"control char in key", p + "{\"seq\x01\":1}", "control character in string"},
      {"empty value", p + R"({"sequence":,"input_tokens":2,"output_tokens":3})",
       "found an invalid value"},
      {"value at end", p + R"({"sequence":)", "found an invalid value"},
  };
  for (const MalformedCase& c : cases) {
    UsageLineResult result = ParseUsageLine(c.line);
    EXPECT_EQ(result.kind, UsageLineKind::kMalformed) << c.name;
    EXPECT_NE(result.error.find(c.error), std::string::npos)
        << c.name << ": got '" << result.error << "', want '" << c.error << "'";
  }
}

TEST(UsageLineTest, UnknownFieldNamesAreEscapedAndBounded) {
  UsageLineResult result =
      ParseUsageLine("KTESIO_USAGE {\"\\u0001" + std::string(200, 'x') + "\":1}");
  EXPECT_EQ(result.kind, UsageLineKind::kMalformed);
  EXPECT_NE(result.error.find("unexpected field \"\\x01xxx"), std::string::npos) << result.error;
  EXPECT_LT(result.error.size(), 100u);
}

// ktesio-shim writes this marker in place of a usage line too long for one record.
TEST(UsageLineTest, TheOverLongMarkerIsMalformedWithItsOwnReason) {
  UsageLineResult result = ParseUsageLine(std::string(kOverlongUsageLine) + "\n");
  EXPECT_EQ(result.kind, UsageLineKind::kMalformed);
  EXPECT_EQ(result.error,
            "longer than 16 KiB (16384 bytes): a usage line must fit in one log record");
  EXPECT_EQ(ParseUsageLine(std::string(kOverlongUsageLine) + "x").error,
            "KTESIO_USAGE must be followed by a space or tab, then a JSON object");
}

TEST(UsageLineTest, SurrogatePairsDecode) {
  UsageLineResult result = ParseUsageLine(R"(KTESIO_USAGE {"\ud83d\ude00":1})");
  EXPECT_EQ(result.kind, UsageLineKind::kMalformed);
  EXPECT_NE(result.error.find("unexpected field"), std::string::npos) << result.error;
}

TEST(UsageLineTest, EmbeddedNulBytesAreHandled) {
  const std::string line("KTESIO_USAGE {\"sequence\":1\0}", 29);
  UsageLineResult result = ParseUsageLine(line);
  EXPECT_EQ(result.kind, UsageLineKind::kMalformed);
}

}  // namespace
}  // namespace ktesio::contract
