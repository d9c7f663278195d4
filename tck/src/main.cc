// ktesio-tck: certify an adapter declaration against a ktesio.v1 daemon (a private one by
// default, or a running one with --socket); with --subject-program, against the subject's own
// program where a section allows it. Exit 0 iff no section failed; 2 usage; 1 when the daemon
// cannot be reached or started.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ktesio/contract/declaration.h"
#include "ktesio/contract/status_macros.h"
#include "ktesio/tck/kit.h"
#include "ktesio/v1/version.h"
#include "private_daemon.h"

namespace {

namespace fs = std::filesystem;
using ktesio::tck::Options;
using ktesio::tck::PrivateDaemon;
using ktesio::tck::Report;

constexpr char kUsage[] =
    "usage: ktesio-tck (--manifest DIR_OR_FILE | --kind BUILTIN) [--json] [--socket PATH]\n"
    "                  [--section ID ...] [--probe PATH] [--subject-program]\n";

constexpr char kHelp[] =
    "\nRuns the Conformance Test Kit against one adapter: a manifest (adapter.toml or its\n"
    "directory) or a daemon builtin. Each section exercises one machine-checkable duty of the\n"
    "Adapter Contract v1 through the daemon's API, on a private daemon unless --socket names one.\n"
    "\n"
    "  --manifest DIR_OR_FILE  the adapter under test\n"
    "  --kind BUILTIN          a daemon builtin instead (hermes, mock)\n"
    "  --json                  the report as one JSON document on stdout\n"
    "  --socket PATH           use the running daemon at PATH instead of a private one\n"
    "  --section ID            run only this section (repeatable)\n"
    "  --probe PATH            the kit's stand-in agent (default: next to ktesio-tck, or\n"
    "                          $KTESIO_PROBE)\n"
    "  --subject-program       run the adapter's own program where a section allows it\n"
    "  --version               print the kit's versions\n"
    "\n"
    "Exit: 0 when no section failed, 1 when one did (or the daemon could not be started),\n"
    "2 for a usage error.\n";

// The command line.
struct Args {
  Options options;  // sections and subject_program set by ParseArgs, the rest by Resolve*
  std::string manifest;
  std::string kind;
  std::string socket;
  std::string probe;
  bool json = false;
  bool help = false;
  bool version = false;
};

// --- argument parsing ----------------------------------------------------------------------------

// Adds `section` to the selection; INVALID_ARGUMENT naming the known ones when it is unknown.
absl::Status AddSection(const std::string& section, Options& options) {
  const auto& all = ktesio::tck::AllSections();
  if (std::find(all.begin(), all.end(), section) == all.end()) {
    std::string known;
    for (const std::string& s : all) {
      known += (known.empty() ? "" : ", ") + s;
    }
    return absl::InvalidArgumentError("unknown section '" + section + "' (sections: " + known +
                                      ")");
  }
  options.sections.push_back(section);
  return absl::OkStatus();
}

// Parses argv, in order; stops at --help. INVALID_ARGUMENT (the usage error) otherwise.
absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  std::string section;
  const std::pair<std::string_view, std::string*> with_value[] = {
      {"--manifest", &args.manifest}, {"--kind", &args.kind},  {"--socket", &args.socket},
      {"--probe", &args.probe},       {"--section", &section},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      args.help = true;
      return args;
    }
    if (arg == "--version") {
      args.version = true;
      return args;
    }
    if (arg == "--json" || arg == "--subject-program") {
      (arg == "--json" ? args.json : args.options.subject_program) = true;
      continue;
    }
    const auto* flag = std::find_if(std::begin(with_value), std::end(with_value),
                                    [&](const auto& f) { return f.first == arg; });
    if (flag == std::end(with_value)) {
      return absl::InvalidArgumentError("unknown argument '" + arg + "'");
    }
    if (i + 1 >= argc) {
      return absl::InvalidArgumentError(arg + " needs a value");
    }
    *flag->second = argv[++i];
    if (flag->second == &section) {
      KT_RETURN_IF_ERROR(AddSection(section, args.options));
    }
  }
  return args;
}

// --- resolving the subject, the probe and the daemon ---------------------------------------------

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// $`env` when set and not empty, else the first executable of `candidates` (canonical when it
// can be made so), else "".
std::string FindNear(const char* env, const std::vector<std::string>& candidates) {
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') {
    return value;
  }
  for (const std::string& c : candidates) {
    if (IsExecutable(c)) {
      std::error_code ec;
      fs::path canonical = fs::canonical(c, ec);
      return ec ? c : canonical.string();
    }
  }
  return "";
}

// Fills the subject (manifest text and path, or builtin kind) and the probe's absolute path into
// args.options. INVALID_ARGUMENT (a usage error) when the subject is not exactly one of
// --manifest and --kind, the manifest cannot be read or no probe is found.
absl::Status ResolveSubjectAndProbe(Args& args) {
  Options& options = args.options;
  if (args.manifest.empty() == args.kind.empty()) {
    return absl::InvalidArgumentError("give exactly one of --manifest or --kind");
  }
  if (!args.manifest.empty()) {
    std::error_code ec;
    const std::string file =
        fs::is_directory(args.manifest, ec) ? args.manifest + "/adapter.toml" : args.manifest;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError("cannot read manifest " + file);
    }
    std::ostringstream text;
    text << in.rdbuf();
    options.manifest_text = text.str();
    options.manifest_path = file;
  } else {
    options.builtin_kind = args.kind;
  }
  const std::string self = SelfDir();
  std::string probe = args.probe;
  if (probe.empty()) {
    probe = FindNear("KTESIO_PROBE",
                     {self + "/../tests/fixtures/probe/ktesio-probe", self + "/ktesio-probe"});
  }
  if (probe.empty() || !IsExecutable(probe)) {
    return absl::InvalidArgumentError(
        "cannot find ktesio-probe (use --probe PATH or KTESIO_PROBE)");
  }
  std::error_code ec;
  fs::path probe_abs = fs::absolute(probe, ec);
  options.probe_path = ec ? probe : probe_abs.string();
  return absl::OkStatus();
}

// A private daemon started for this run, or nullptr when the one at `socket` answers. The
// message to print (exit 1) otherwise.
absl::StatusOr<std::unique_ptr<PrivateDaemon>> DaemonUnderTest(const std::string& socket,
                                                               const std::string& probe_path) {
  if (!socket.empty()) {
    if (!ktesio::tck::DaemonAnswers(socket)) {
      return absl::UnavailableError("cannot reach ktesiod at " + socket);
    }
    return nullptr;
  }
  const std::string self = SelfDir();
  std::string ktesiod = FindNear("KTESIOD", {self + "/../ktesiod/ktesiod", self + "/ktesiod"});
  if (ktesiod.empty()) {
    return absl::NotFoundError("cannot find ktesiod (set KTESIOD or use --socket)");
  }
  return PrivateDaemon::Start(ktesiod, probe_path);
}

// --- reporting -----------------------------------------------------------------------------------

void PrintReport(const Report& report, bool json, bool subject_program) {
  if (json) {
    std::cout << ktesio::tck::ReportJson(report) << "\n";
    for (const auto& s : report.sections) {
      if (!s.note.empty()) {
        std::cerr << "ktesio-tck: note: " << s.section << ": " << s.note << "\n";
      }
    }
    return;
  }
  std::cout << "adapter " << report.adapter_kind << " (contract 1.0.0)"
            << (subject_program ? ", subject's own program" : "") << "\n";
  for (const auto& s : report.sections) {
    std::cout << s.section << "  " << s.status;
    if (!s.reason.empty()) {
      std::cout << "  " << s.reason;
    }
    if (!s.note.empty()) {
      std::cout << "  (" << s.note << ")";
    }
    std::cout << "\n";
  }
  std::cout << "honor-system duties (not checked by any section): env_var_render, "
               "self_update_pinning, config_layer_disclosure — unverified\n";
  std::cout << (ktesio::tck::Conformant(report)
                    ? "verdict: conformant (every machine-checkable duty exercised here held)"
                    : "verdict: NOT conformant (at least one section failed)")
            << "\n";
}

int Usage(absl::string_view why) {
  std::cerr << "ktesio-tck: " << why << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    return Usage(args.status().message());
  }
  if (args->help) {
    std::cout << kUsage << kHelp;
    return 0;
  }
  if (args->version) {
    std::cout << "ktesio-tck " << ktesio::v1::kKtesioVersion << " (api " << ktesio::v1::kApiVersion
              << ", contract " << ktesio::contract::kContractVersion << ")\n";
    return 0;
  }
  if (absl::Status resolved = ResolveSubjectAndProbe(*args); !resolved.ok()) {
    return Usage(resolved.message());
  }
  Options& options = args->options;
  absl::StatusOr<std::unique_ptr<PrivateDaemon>> daemon =
      DaemonUnderTest(args->socket, options.probe_path);
  if (!daemon.ok()) {
    std::cerr << "ktesio-tck: " << daemon.status().message() << "\n";
    return 1;
  }
  options.socket_path = *daemon != nullptr ? (*daemon)->socket() : args->socket;
  const Report report = ktesio::tck::RunKit(options);
  daemon->reset();  // stopped and cleaned up before the report is printed
  PrintReport(report, args->json, options.subject_program);
  return ktesio::tck::Conformant(report) ? 0 : 1;
}
