// Generates the man pages from the same definitions the programs use: ktctl.1 from ktctl's
// command table (usage, summary and arguments of every command, as `ktctl CMD --help` prints
// them) and
// ktesiod.8 from the daemon's usage text. Usage: ktesio-mangen OUT_DIR

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "cli/app.h"
#include "daemon/options.h"
#include "ktesio/v1/version.h"

namespace {

// Escapes text for roff: backslashes, and a leading dot or quote.
std::string Roff(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) {
    out.insert(0, "\\&");
  }
  return out;
}

std::string Ktctl() {
  std::string page = ".TH KTCTL 1 \"\" \"ktesio " + std::string(ktesio::v1::kKtesioVersion) +
                     "\" \"Ktesio\"\n"
                     ".SH NAME\nktctl \\- drive the Ktesio agent supervisor (ktesiod)\n"
                     ".SH SYNOPSIS\n.B ktctl\n[\\fB\\-\\-socket\\fR \\fIPATH\\fR] "
                     "[\\fB\\-\\-json\\fR] [\\fB\\-\\-timeout\\fR \\fISECS\\fR] "
                     "\\fICOMMAND\\fR ...\n"
                     ".SH DESCRIPTION\n"
                     "ktctl is a thin client of the ktesio.v1 gRPC API served by ktesiod on a "
                     "Unix socket. Global flags may appear anywhere on the line.\n"
                     ".SH COMMANDS\n";
  for (const ktesio::cli::Command& command : ktesio::cli::Commands()) {
    page += ".TP\n.B " + Roff(command.Usage()) + "\n" + Roff(command.summary) + "\n";
    for (const ktesio::cli::Arg& arg : command.args) {
      page +=
          ".br\n\\fB" + Roff(ktesio::cli::ArgLabel(arg)) + "\\fR \\(em " + Roff(arg.help) + "\n";
    }
  }
  page +=
      ".SH ENVIRONMENT\n.TP\n.B KTESIO_SOCKET\nThe daemon's socket when \\-\\-socket is not "
      "given.\n"
      ".SH EXIT STATUS\n"
      ".TP\n0\nsuccess (also \\-\\-help, \\-\\-version, a closed stdout pipe)\n"
      ".TP\n1\ngeneral error: I/O, store, invalid manifest, launch failure\n"
      ".TP\n2\nusage error: bad flags, invalid name, unknown kind or config key, duplicate name\n"
      ".TP\n3\nnot found\n"
      ".TP\n4\ninvalid state for the operation\n"
      ".TP\n5\nthe capability is unsupported on this OS by the adapter's declaration\n"
      ".TP\n6\ntimed out\n"
      ".TP\n7\ndaemon unreachable or API major version mismatch\n"
      ".SH SEE ALSO\nktesiod(8); /usr/share/doc/ktesio/commands.md\n";
  return page;
}

std::string Ktesiod() {
  std::string page = ".TH KTESIOD 8 \"\" \"ktesio " + std::string(ktesio::v1::kKtesioVersion) +
                     "\" \"Ktesio\"\n"
                     ".SH NAME\nktesiod \\- the Ktesio agent supervisor daemon\n"
                     ".SH DESCRIPTION\n"
                     "ktesiod supervises AI agents as services: it launches each under its own "
                     "ktesio\\-shim, restarts them, meters their usage, enforces budgets and "
                     "serves the ktesio.v1 gRPC API on a Unix socket. Agents keep running across "
                     "daemon restarts and upgrades. SIGTERM stops the daemon (agents keep "
                     "running); SIGHUP re\\-reads ktesiod.toml.\n"
                     ".SH OPTIONS\n.nf\n";
  page += Roff(ktesio::daemon::kDaemonUsage);
  page +=
      ".fi\n.SH FILES\n.TP\n/etc/ktesio/ktesiod.toml\nsystem\\-mode config (optional)\n"
      ".TP\n/var/lib/ktesio\nsystem\\-mode state (state.db, agent homes)\n"
      ".TP\n/run/ktesio/ktesiod.sock\nsystem\\-mode API socket (0660, group ktesio)\n"
      ".SH SEE ALSO\nktctl(1); /usr/share/doc/ktesio/operations.md\n";
  return page;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ktesio-mangen OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ofstream(dir + "/ktctl.1") << Ktctl();
  std::ofstream(dir + "/ktesiod.8") << Ktesiod();
  return 0;
}
