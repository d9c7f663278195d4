// FindTooDeepNesting: the depth guard run before toml++ sees any text.

#include "ktesio/contract/toml_depth.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace ktesio::contract {
namespace {

std::string Repeat(const std::string& piece, int n, const std::string& separator = "") {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += (i == 0 ? "" : separator) + piece;
  }
  return out;
}

TEST(TomlDepthTest, OrdinaryDocumentsPass) {
  const char* documents[] = {
      "contract_version = \"1.0.0\"\n[adapter]\nkind = \"k\"\n[lifecycle.start]\nexec = \"x\"\n"
      "args = [\"--a\", \"b\"]\n[config.\"memory.dir\"]\nenv = \"M\"\n",
      "[agents.web.config]\n\"budget.tokens.per_run\" = 5\nlabels = { team = \"a\", tier = \"1\" "
      "}\n",
      "[[fleet.hosts]]\nname = \"h\"\n[[fleet.hosts]]\nname = \"i\"\n",
      "a = [\n  { b = 1 },\n  { c.d = [1, 2, [3]] },\n]\n",
      "x = {}\ny = []\nz = { a = {}, b = [] }\n",
  };
  for (const char* text : documents) {
    EXPECT_EQ(FindTooDeepNesting(text), std::nullopt) << text;
  }
}

TEST(TomlDepthTest, DotsAndBracketsInStringsCommentsAndNumbersDoNotCount) {
  const std::string dots = Repeat("a", 500, ".");
  const std::string brackets = std::string(500, '[') + std::string(500, '{');
  const std::string documents[] = {
      "k = \"" + dots + brackets + "\"\n",
      "k = '" + dots + brackets + "'\n",
      "k = \"\"\"\n" + dots + "\n" + brackets + "\n\"\"\"\n",
      "k = '''" + brackets + "\n'''\n",
      "# " + dots + brackets + "\nk = 1\n",
      "k = 1 # " + brackets + "\n",
      "\"" + dots + "\" = 1\n",                    // one quoted key segment
      "[\"" + dots + "\"]\nk = 1\n",               // one quoted header segment
      "k = [" + Repeat("1.5", 500, ", ") + "]\n",  // floats: value dots
      "k = \"\\\"" + brackets + "\"\n",            // an escaped quote does not end the string
      "k = \"\"\"a\"\"\"\"\nl = [" + Repeat("[1]", 60, ",") + "]\n",  // content ends in a quote
  };
  for (const std::string& text : documents) {
    EXPECT_EQ(FindTooDeepNesting(text), std::nullopt) << text;
  }
}

TEST(TomlDepthTest, DeepNestingIsFoundWithItsLine) {
  struct Case {
    std::string text;
    uint32_t line;
  };
  const Case cases[] = {
      {"a = 1\n[" + Repeat("t", 65, ".") + "]\n", 2},
      {"a = 1\n\nb = 2\n" + Repeat("k", 65, ".") + " = 1\n", 4},
      {"[config." + Repeat("a", 10000, ".") + "]\nenv = \"X\"\n", 1},
      {"[" + Repeat("t", 40, ".") + "]\n" + Repeat("k", 30, ".") + " = 1\n", 2},
      {"k = " + std::string(70, '[') + std::string(70, ']') + "\n", 1},
      {"k = " + Repeat("{ a = ", 70) + "1" + std::string(70, '}') + "\n", 1},
      {"k = [\n" + Repeat("[", 70) + "\n", 2},
      {"k = { a = 1, " + Repeat("b", 70, ".") + " = 1 }\n", 1},
      {"s = \"\"\"\n\n\n\"\"\"\n" + Repeat("k", 65, ".") + " = 1\n", 5},
      {"[[" + Repeat("t", 65, ".") + "]]\n", 1},
  };
  for (const Case& c : cases) {
    std::optional<TomlTooDeep> deep = FindTooDeepNesting(c.text);
    ASSERT_TRUE(deep.has_value()) << c.text.substr(0, 200);
    EXPECT_EQ(deep->line, c.line) << c.text.substr(0, 200);
    EXPECT_NE(deep->message.find("deeper than 64 levels"), std::string::npos) << deep->message;
  }
}

TEST(TomlDepthTest, TheLimitIsInclusive) {
  EXPECT_EQ(FindTooDeepNesting("[" + Repeat("t", 64, ".") + "]\n"), std::nullopt);
  EXPECT_NE(FindTooDeepNesting("[" + Repeat("t", 65, ".") + "]\n"), std::nullopt);
  EXPECT_EQ(FindTooDeepNesting("[a.b]\nc = 1\n", 3), std::nullopt);
  EXPECT_NE(FindTooDeepNesting("[a.b]\nc.d = 1\n", 3), std::nullopt);
}

// The depth of the tree toml++ builds: tables, arrays and inline tables, each a level.
int TreeDepth(const toml::node& node) {
  int deepest = 0;
  if (const toml::table* table = node.as_table()) {
    for (const auto& [key, child] : *table) {
      deepest = std::max(deepest, TreeDepth(child));
    }
    return deepest + 1;
  }
  if (const toml::array* array = node.as_array()) {
    for (const toml::node& child : *array) {
      deepest = std::max(deepest, TreeDepth(child));
    }
    return deepest + 1;
  }
  return 0;
}

// Random valid documents: the guard's count never falls below the depth toml++ really builds, so
// whatever it lets through is no deeper than its limit, and it is at most about twice that.
TEST(TomlDepthTest, NeverUnderestimatesWhatTheParserBuilds) {
  std::mt19937 random(20261206);
  auto pick = [&](int n) { return static_cast<int>(random() % n); };
  std::function<std::string(int)> value = [&](int budget) -> std::string {
    switch (budget <= 0 ? 0 : pick(6)) {
      case 0:
        return pick(2) ? "1.5" : "\"s.[{\"";
      case 1:
      case 2: {
        std::string out = "[";
        for (int i = 0, n = pick(3); i < n; ++i) {
          out += (i ? ", " : "") + value(budget - 1);
        }
        return out + "]";
      }
      default: {
        std::string out = "{ ";
        for (int i = 0, n = pick(3); i < n; ++i) {
          out += (i ? ", " : "") + Repeat("k" + std::to_string(i), 1 + pick(3), ".") + " = " +
                 value(budget - 1);
        }
        return out + " }";
      }
    }
  };
  int checked = 0;
  for (int doc = 0; doc < 2000; ++doc) {
    std::string text;
    for (int t = 0, tables = 1 + pick(3); t < tables; ++t) {
      text += "[" + Repeat("h" + std::to_string(doc) + "x" + std::to_string(t), 1 + pick(6), ".") +
              "]\n";
      for (int k = 0, keys = pick(3); k < keys; ++k) {
        text += Repeat("v" + std::to_string(k), 1 + pick(4), ".") + " = " + value(pick(8)) + "\n";
      }
    }
    toml::parse_result parsed = toml::parse(text);
    if (!parsed) {
      continue;  // a random clash (a key both a table and a value): not what this checks
    }
    const int depth = TreeDepth(parsed.table()) - 1;  // the root is no level
    ++checked;
    // It may count a level too many per nesting (the key that holds a value), never more.
    EXPECT_EQ(FindTooDeepNesting(text, 2 * depth + 2), std::nullopt) << depth << "\n" << text;
    if (depth > 1) {
      EXPECT_NE(FindTooDeepNesting(text, depth - 1), std::nullopt) << depth << "\n" << text;
    }
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace ktesio::contract
