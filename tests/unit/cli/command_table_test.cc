// The command table is ktctl's one declaration of its commands: these tests hold it well formed
// (so parsing, --help, completions and the man page can rely on it) and hold docs/commands.md to
// the usage lines it generates.

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

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

// Every `ktctl ...` invocation the project shows an operator (docs, README, packaging such as
// the alert rules, examples) names a real command and only flags that command or ktctl takes.
TEST(CommandTable, EveryShownInvocationNamesARealCommandAndFlags) {
  namespace fs = std::filesystem;
  const fs::path root(KT_SOURCE_DIR);
  std::vector<fs::path> files = {root / "README.md"};
  for (const char* dir : {"docs", "packaging", "examples"}) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() &&
          (ext == ".md" || ext == ".yml" || ext == ".toml" || ext == ".service" ||
           ext == ".plist" || ext == ".hcl" || ext == ".yaml" || ext == ".sh" || ext == ".ps1")) {
        files.push_back(entry.path());
      }
    }
  }
  // Shown on purpose as mistakes (the did-you-mean example).
  const std::set<std::string> deliberate = {"ktctl agent strat x"};
  // Words that stand for a command in prose (`ktctl COMMAND --help`).
  const std::set<std::string> placeholders = {"COMMAND", "...", "\u2026"};
  const std::set<std::string> globals = {"--json", "--socket", "--timeout",
                                         "--help", "-h",       "--version"};
  size_t checked = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    // Inline code (`ktctl ...`) and console examples ($ ktctl ...).
    std::vector<std::string> invocations;
    for (size_t at = text.find("`ktctl "); at != std::string::npos;
         at = text.find("`ktctl ", at + 1)) {
      const size_t end = text.find('`', at + 1);
      if (end == std::string::npos) {
        break;
      }
      invocations.push_back(text.substr(at + 1, end - at - 1));
    }
    for (size_t at = text.find("\n$ ktctl "); at != std::string::npos;
         at = text.find("\n$ ktctl ", at + 1)) {
      std::string line = text.substr(at + 3, text.find('\n', at + 1) - at - 3);
      line = line.substr(0, line.find(" |"));  // a pipe into another program
      line = line.substr(0, line.find(" >"));
      line = line.substr(0, line.find(" <"));
      invocations.push_back(line);
    }
    for (std::string shown : invocations) {
      if (deliberate.count(shown) != 0) {
        continue;
      }
      // A usage line wrapped in prose, and its optional parts: [--since CURSOR] checks --since.
      std::replace(shown.begin(), shown.end(), '\n', ' ');
      std::string plain = shown;
      for (char& c : plain) {
        c = std::strchr("[](){}|", c) != nullptr ? ' ' : c;
      }
      std::vector<std::string> words;
      std::istringstream split(plain.substr(6));
      for (std::string word; split >> word;) {
        words.push_back(word);
      }
      // The longest command whose path the leading words spell (global flags may come first).
      size_t first = 0;
      while (first < words.size() &&
             globals.count(words[first].substr(0, words[first].find('='))) != 0) {
        first += words[first].find('=') == std::string::npos && words[first] != "--json" &&
                         words[first] != "--help" && words[first] != "-h" &&
                         words[first] != "--version"
                     ? 2
                     : 1;
      }
      const Command* command = nullptr;
      for (const Command& candidate : Commands()) {
        if (candidate.path.size() <= words.size() - std::min(first, words.size()) &&
            std::equal(candidate.path.begin(), candidate.path.end(), words.begin() + first) &&
            (command == nullptr || candidate.path.size() > command->path.size())) {
          command = &candidate;
        }
      }
      SCOPED_TRACE(file.string() + ": " + shown);
      if (command == nullptr) {
        // `ktctl --version`, `ktctl --help`, `ktctl COMMAND --help`: only global flags, and no
        // word that would be a command.
        for (size_t i = first; i < words.size(); ++i) {  // past the global flags and values
          if (words[i].starts_with("-")) {
            EXPECT_EQ(globals.count(words[i].substr(0, words[i].find('='))), 1U) << words[i];
          } else {
            EXPECT_TRUE(placeholders.count(words[i]) != 0) << "no command `" << words[i] << "`";
          }
        }
        continue;
      }
      ++checked;
      for (size_t i = first + command->path.size(); i < words.size(); ++i) {
        const std::string flag = words[i].substr(0, words[i].find('='));
        if (!flag.starts_with("-") || flag == "--" || flag == "-" ||
            (flag.size() > 1 && (std::isdigit(static_cast<unsigned char>(flag[1])) != 0))) {
          if (flag == "--") {
            break;  // the rest is passed through
          }
          continue;
        }
        const bool known =
            globals.count(flag) != 0 ||
            std::any_of(command->args.begin(), command->args.end(),
                        [&](const Arg& arg) { return arg.name == flag || arg.alias == flag; });
        EXPECT_TRUE(known) << "`" << command->Name() << "` takes no " << flag;
      }
    }
  }
  EXPECT_GT(checked, 100U) << "the scan found the documented invocations";
}

}  // namespace
}  // namespace ktesio::cli
