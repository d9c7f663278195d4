// Strict UTF-8 (utf8.h) and the JSON writer's string escaping, which every --json document,
// event payload and snapshot goes through.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::contract {
namespace {

std::string Escaped(std::string_view text) {
  std::string out;
  AppendJsonEscaped(out, text);
  return out;
}

TEST(Utf8, AcceptsValidAndNamesTheFirstInvalidByte) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_EQ(FirstInvalidUtf8("ok \xff rest"), 3u);
  EXPECT_EQ(FirstInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xed\xa0\x80"), 0u);      // a UTF-16 surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ab\xe2\x82"), 2u);        // cut off
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0u);              // a lone continuation byte
}

TEST(Utf8, ToValidReplacesEachBadByteWithTheReplacementCharacter) {
  EXPECT_EQ(ToValidUtf8("fine \xc3\xa9"), "fine \xc3\xa9");
  EXPECT_EQ(ToValidUtf8("bad \xff\xfe!"), "bad \xef\xbf\xbd\xef\xbf\xbd!");
  EXPECT_EQ(ToValidUtf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80")));
}

TEST(JsonEscape, EscapesWhatJsonRequiresAndKeepsTheRest) {
  EXPECT_EQ(Escaped("plain text, long enough to be copied as one run"),
            "plain text, long enough to be copied as one run");
  EXPECT_EQ(Escaped("say \"hi\" \\ bye"), "say \\\"hi\\\" \\\\ bye");
  EXPECT_EQ(Escaped("a\nb\rc\td\be\ff"), "a\\nb\\rc\\td\\be\\ff");
  EXPECT_EQ(Escaped(std::string("nul\0x\x01\x1f\x7f", 8)), "nul\\u0000x\\u0001\\u001f\\u007f");
  EXPECT_EQ(Escaped("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(Escaped("bad \xff end"), "bad \xef\xbf\xbd end");
  EXPECT_EQ(Escaped("\""), "\\\"");
  EXPECT_EQ(Escaped(""), "");
}

}  // namespace
}  // namespace ktesio::contract
