// RenderTomlDocument and MergeIntoTomlDocument.

#include <string>

#include "gtest/gtest.h"
#include "ktesio/contract/config_mapping.h"
#include "status_testing.h"

namespace ktesio::contract {
namespace {

using testing::IsOk;
using testing::StatusIs;

absl::StatusOr<std::string> Render(const std::vector<std::pair<std::string, std::string>>& values) {
  return RenderTomlDocument(values);
}

::testing::AssertionResult ConfigInvalid(const absl::StatusOr<std::string>& s,
                                         std::string_view substring) {
  return StatusIs(s, absl::StatusCode::kInvalidArgument, reason::kConfigInvalid, substring);
}

TEST(RenderTomlDocumentTest, NestedKeysBecomeTables) {
  absl::StatusOr<std::string> doc = Render({{"llm.model", "x"}});
  ASSERT_TRUE(IsOk(doc));
  EXPECT_EQ(*doc, "[llm]\nmodel = \"x\"\n");
}

TEST(RenderTomlDocumentTest, TopLevelKeysFirstThenSortedTables) {
  absl::StatusOr<std::string> doc = Render(
      {{"z.deep.key", "3"}, {"llm.model", "m"}, {"top", "t"}, {"llm.endpoint", "e"}, {"a", "1"}});
  ASSERT_TRUE(IsOk(doc));
  EXPECT_EQ(*doc,
            "a = \"1\"\n"
            "top = \"t\"\n"
            "\n[llm]\n"
            "endpoint = \"e\"\n"
            "model = \"m\"\n"
            "\n[z.deep]\n"
            "key = \"3\"\n");
}

TEST(RenderTomlDocumentTest, EmptyInputIsAnEmptyDocument) {
  absl::StatusOr<std::string> doc = Render({});
  ASSERT_TRUE(IsOk(doc));
  EXPECT_EQ(*doc, "");
}

TEST(RenderTomlDocumentTest, EscapesValues) {
  absl::StatusOr<std::string> doc = Render({{"k",
                                             "q\"b\\n\nt\tc\x01"
                                             "d\x7f"
                                             "e\r\b\f"}});
  ASSERT_TRUE(IsOk(doc));
  EXPECT_EQ(*doc, "k = \"q\\\"b\\\\n\\nt\\tc\\u0001d\\u007Fe\\r\\b\\f\"\n");
  absl::StatusOr<std::string> unicode = Render({{"k", "caf\xC3\xA9 \xF0\x9F\x98\x80"}});
  ASSERT_TRUE(IsOk(unicode));
  EXPECT_EQ(*unicode, "k = \"caf\xC3\xA9 \xF0\x9F\x98\x80\"\n");
}

TEST(RenderTomlDocumentTest, RenderedDocumentsParseBack) {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"a.b", "x\"y"}, {"a.c.d", "\n"}, {"e", "\\"}, {"under_score-dash", "'"}};
  absl::StatusOr<std::string> doc = Render(values);
  ASSERT_TRUE(IsOk(doc));
  // Merging nothing into a document parses it: proves the rendering is valid TOML.
  absl::StatusOr<std::string> reparsed = MergeIntoTomlDocument(*doc, {});
  ASSERT_TRUE(IsOk(reparsed));
  // ...and merging the same values into it changes nothing semantically.
  absl::StatusOr<std::string> merged = MergeIntoTomlDocument(*doc, values);
  ASSERT_TRUE(IsOk(merged));
  EXPECT_EQ(*merged, *reparsed);
}

TEST(RenderTomlDocumentTest, Conflicts) {
  EXPECT_TRUE(ConfigInvalid(Render({{"a.b", "1"}, {"a.b.c", "2"}}),
                            "native keys 'a.b' and 'a.b.c' conflict"));
  EXPECT_TRUE(ConfigInvalid(Render({{"a.b.c", "2"}, {"a.b", "1"}}),
                            "native keys 'a.b' and 'a.b.c' conflict"));
  EXPECT_TRUE(ConfigInvalid(Render({{"a", "1"}, {"a", "2"}}), "native key 'a' is given twice"));
}

TEST(RenderTomlDocumentTest, RejectsBadKeysAndValues) {
  for (const char* key : {"", ".a", "a.", "a..b", "a b", "a=b", "\"q\""}) {
    EXPECT_TRUE(ConfigInvalid(Render({{key, "v"}}), "must be a dotted key")) << key;
  }
  EXPECT_TRUE(ConfigInvalid(Render({{"k", "\xff"}}), "not valid UTF-8"));
  EXPECT_TRUE(ConfigInvalid(Render({{"k", "\xC0\x80"}}), "not valid UTF-8"));      // overlong
  EXPECT_TRUE(ConfigInvalid(Render({{"k", "\xED\xA0\x80"}}), "not valid UTF-8"));  // surrogate
  EXPECT_TRUE(ConfigInvalid(Render({{"k", "\xF4\x90\x80\x80"}}), "not valid UTF-8"));
  EXPECT_TRUE(ConfigInvalid(Render({{"k", "\xE2\x82"}}), "not valid UTF-8"));  // truncated
}

TEST(MergeIntoTomlDocumentTest, KeepsOtherKeysAndReplacesValues) {
  absl::StatusOr<std::string> merged = MergeIntoTomlDocument(
      "# agent config\ntheme = \"dark\"\n[llm]\nmodel = \"old\"\ntemperature = 0.5\n",
      {{"llm.model", "new"}, {"paths.data", "/d"}});
  ASSERT_TRUE(IsOk(merged));
  // Round-trip through a second merge that changes nothing to compare canonical forms.
  absl::StatusOr<std::string> expected = MergeIntoTomlDocument(
      "theme = \"dark\"\n[llm]\nmodel = \"new\"\ntemperature = 0.5\n[paths]\ndata = \"/d\"\n", {});
  ASSERT_TRUE(IsOk(expected));
  EXPECT_EQ(*merged, *expected);
  EXPECT_NE(merged->find("model = \"new\""), std::string::npos) << *merged;
  EXPECT_NE(merged->find("temperature = 0.5"), std::string::npos) << *merged;
  EXPECT_EQ(merged->find("old"), std::string::npos) << *merged;
}

TEST(MergeIntoTomlDocumentTest, EmptyExistingDocument) {
  absl::StatusOr<std::string> merged = MergeIntoTomlDocument("", {{"k", "v"}});
  ASSERT_TRUE(IsOk(merged));
  EXPECT_EQ(*merged, "k = \"v\"\n");
}

TEST(MergeIntoTomlDocumentTest, Conflicts) {
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("llm = \"x\"\n", {{"llm.model", "m"}}),
                            "native key 'llm.model' conflicts with the existing value 'llm'"));
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("[llm]\nmodel = \"m\"\n", {{"llm", "x"}}),
                            "conflicts with an existing table"));
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("[[llm]]\nmodel = \"m\"\n", {{"llm", "x"}}),
                            "conflicts with an existing table"));
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("[[llm]]\nmodel = \"m\"\n", {{"llm.model", "x"}}),
                            "conflicts with the existing value 'llm'"));
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("", {{"a", "1"}, {"a.b", "2"}}), "conflict"));
}

TEST(MergeIntoTomlDocumentTest, InvalidExistingDocument) {
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("x = \n", {{"k", "v"}}),
                            "existing document is not valid TOML: 1:"));
}

// Found by fuzz_toml_document: toml++ writes the quoted key 'r<TAB>' back bare, which then reads
// as key "r". A document that cannot be rewritten faithfully is refused, not silently changed.
TEST(MergeIntoTomlDocumentTest, KeysTheWriterCannotKeepAreRefused) {
  EXPECT_TRUE(ConfigInvalid(MergeIntoTomlDocument("'r\t\t' = 'v'\n", {{"k", "v"}}),
                            "cannot be rewritten faithfully"));
  EXPECT_TRUE(MergeIntoTomlDocument("'a b' = 'v'\n", {{"k", "v"}}).ok()) << "quoted is kept";
}

}  // namespace
}  // namespace ktesio::contract
