// The one TOML string quoter: whatever bytes go in, valid TOML comes out and reads back equal.

#include "ktesio/contract/toml_text.h"

#include "gtest/gtest.h"
#include "ktesio/contract/fleet_file.h"

namespace ktesio::contract {
namespace {

TEST(QuoteTomlString, EscapesEveryControlCharacter) {
  EXPECT_EQ(QuoteTomlString("plain"), "\"plain\"");
  EXPECT_EQ(QuoteTomlString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(QuoteTomlString("\b\t\n\f\r"), "\"\\b\\t\\n\\f\\r\"");
  EXPECT_EQ(QuoteTomlString(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001F\\u007F\"");
  EXPECT_EQ(QuoteTomlString("é"), "\"é\"");
}

TEST(QuoteTomlString, EveryByteRoundTripsThroughAParser) {
  std::string all;
  for (int c = 1; c < 0x80; ++c) {
    all.push_back(static_cast<char>(c));
  }
  all += "é€";
  // A fleet file is a convenient TOML reader that hands string values back verbatim.
  const std::string text = "[fleet]\nname = \"x\"\n[agents.a]\nkind = \"m\"\n[agents.a.config]\n" +
                           TomlKeySegment("agent.X") + " = " + QuoteTomlString(all) + "\n";
  FleetFileParse parsed = ParseFleetFile(text, "t.toml");
  ASSERT_TRUE(parsed.problems.empty()) << parsed.problems.front();
  ASSERT_EQ(parsed.spec.agents.size(), 1u);
  ASSERT_EQ(parsed.spec.agents[0].config.size(), 1u);
  EXPECT_EQ(parsed.spec.agents[0].config[0].key, "agent.X");
  EXPECT_EQ(parsed.spec.agents[0].config[0].value, all);
}

TEST(TomlKeySegment, BareWhenItCanBe) {
  EXPECT_EQ(TomlKeySegment("coder-1"), "coder-1");
  EXPECT_EQ(TomlKeySegment("a.b"), "\"a.b\"");
  EXPECT_EQ(TomlKeySegment(""), "\"\"");
  EXPECT_EQ(TomlKeySegment("ktesio.io/fleet"), "\"ktesio.io/fleet\"");
}

}  // namespace
}  // namespace ktesio::contract
