#pragma once

// The Conformance Test Kit as a library: certifies an adapter declaration against a running
// ktesio.v1 daemon, through the public gRPC API only (never by linking the daemon).
//
// By default, sections that need agent behaviour run the fixture agent ktesio-probe under the
// subject's declaration (capabilities, metering source, interaction channel, config mapping),
// so a pass is evidence about the engine honoring the declaration, never about the real
// agent's behaviour. Subject mode (Options::subject_program) launches the subject's own program
// where a section can be proven against an arbitrary program, and observes its real processes.
// See tck/README.md for what each section proves and cannot prove in each mode.

#include <chrono>
#include <string>
#include <vector>

namespace ktesio::tck {

struct SectionResult {
  std::string section;
  std::string status;  // "pass" | "fail" | "not_applicable"
  std::string reason;  // empty for pass
  // A pass's note on what the section could not exercise (say, a mapped config key the daemon
  // refuses to set). Not part of the JSON report's result, whose pass carries no reason: the
  // runner prints it in the text report and, with --json, on stderr.
  std::string note;
};

struct Report {
  std::string adapter_kind;
  std::vector<SectionResult> sections;
};

struct Options {
  // Unix socket of the daemon under test (required).
  std::string socket_path;
  // The subject: either a manifest (text plus the path used in messages) or a builtin kind.
  std::string manifest_text;
  std::string manifest_path;
  std::string builtin_kind;
  // Absolute path of ktesio-probe as the daemon sees it.
  std::string probe_path;
  // Section ids to run, in any order; empty = all. Unknown ids are reported as fail.
  std::vector<std::string> sections;
  // Subject mode: lifecycle, pause, config_mapping, metering_self_reported and memory register
  // the subject itself (its own start exec/args/env and its own stop/pause/resume templates)
  // and check its real process tree; the crash leg of lifecycle, metering_engine_observed and
  // interaction still run the probe (they need its cooperation). Off: every section but
  // capability_edges runs the probe.
  bool subject_program = false;
  // Upper bound of every wait inside one section.
  std::chrono::seconds section_timeout{30};
};

// The section ids in report order.
const std::vector<std::string>& AllSections();

// Runs the selected sections in the fixed order. One section's failure never aborts the others
// (a step a section cannot complete is that section's `fail`); instances the kit registered are
// removed (force, home deleted).
Report RunKit(const Options& options);

// The report document (schema_version 1), one line, no trailing newline.
std::string ReportJson(const Report& report);

// True when no section failed.
bool Conformant(const Report& report);

}  // namespace ktesio::tck
