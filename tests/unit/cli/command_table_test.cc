// The command table is ktctl's one declaration of its commands: these tests hold it well formed
// (so parsing, --help, completions and the man page can rely on it) and hold docs/commands.md to
// the usage lines it generates.

#include <fstream>
#include <set>
#include <sstream>

#include "cli/app.h"
#include "gtest/gtest.h"

namespace ktesio::cli {
namespace {

TEST(CommandTable, EveryCommandIsDeclaredOnceAndCompletely) {
  std::set<std::string> names;
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.Name());
    EXPECT_TRUE(names.insert(command.Name()).second) << "declared twice";
    EXPECT_FALSE(command.summary.empty());
    EXPECT_TRUE(command.run != nullptr);
    std::set<std::string_view> spellings;
    bool list_seen = false;
    for (const Arg& arg : command.args) {
      SCOPED_TRACE(arg.name);
      EXPECT_FALSE(arg.help.empty()) << "every argument has a help line";
      EXPECT_TRUE(spellings.insert(arg.name).second);
      if (!arg.alias.empty()) {
        EXPECT_TRUE(arg.IsFlag());
        EXPECT_TRUE(spellings.insert(arg.alias).second);
      }
      if (!arg.IsFlag()) {
        EXPECT_FALSE(list_seen) << "a list operand takes the rest: it comes last";
        list_seen = list_seen || arg.IsList();
      } else {
        // Global flags are taken before the command sees its arguments; only stop and restart
        // own --timeout (their graceful window).
        const bool stop_window =
            command.Name() == "agent stop" || command.Name() == "agent restart";
        for (std::string_view global : {"--json", "--socket", "--help", "-h", "--version"}) {
          EXPECT_NE(arg.name, global);
          EXPECT_NE(arg.alias, global);
        }
        EXPECT_TRUE(arg.name != "--timeout" || stop_window);
      }
      EXPECT_FALSE(arg.repeatable && arg.value.empty()) << "only a value flag repeats";
      for (const Arg& other : command.args) {
        if (arg.group != 0 && other.group == arg.group) {
          EXPECT_EQ(arg.need, other.need) << "alternatives are required or optional together";
        }
      }
    }
  }
}

TEST(CommandTable, HelpListsEveryArgument) {
  for (const Command& command : Commands()) {
    const std::string help = command.Help();
    EXPECT_EQ(help.rfind("usage: ktctl " + command.Usage() + "\n", 0), 0U) << help;
    for (const Arg& arg : command.args) {
      EXPECT_NE(help.find(ArgLabel(arg)), std::string::npos) << command.Name() << ": " << help;
    }
  }
}

// docs/commands.md shows each command's usage line as ktctl prints it.
TEST(CommandTable, TheCommandReferenceShowsEveryUsageLine) {
  std::ifstream in(std::string(KT_SOURCE_DIR) + "/docs/commands.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> lines;
  std::string line;
  while (std::getline(text, line)) {
    lines.insert(line);
  }
  for (const Command& command : Commands()) {
    EXPECT_TRUE(lines.count("ktctl " + command.Usage()) != 0)
        << "docs/commands.md lacks the line: ktctl " << command.Usage();
  }
}

}  // namespace
}  // namespace ktesio::cli
