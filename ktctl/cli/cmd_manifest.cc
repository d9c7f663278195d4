// ktctl manifest lint: offline validation through the same library the daemon uses.

#include <sys/stat.h>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/manifest_file.h"
#include "cli/output.h"
#include "ktesio/contract/error.h"
#include "ktesio/contract/json_writer.h"
#include "ktesio/contract/manifest.h"
#include "ktesio/contract/utf8.h"

namespace ktesio::cli {
namespace {

int Lint(Context& ctx, const LocalArgs& args) {
  absl::StatusOr<ManifestText> text = ReadManifestFile(args.positionals[0]);
  if (!text.ok()) {
    // No adapter.toml at the path is "not found" (3), as in `agent register`; anything else
    // that stops the read (not a regular file, too large, unreadable) is MANIFEST_INVALID, 1.
    const std::string reason = contract::ErrorReason(text.status());
    return ReportError(ctx.global.json, reason, std::string(text.status().message()),
                       reason == "MANIFEST_NOT_FOUND" ? kExitNotFound : kExitGeneral);
  }
  const std::string& path = text->path;
  absl::StatusOr<contract::AdapterDeclaration> declaration =
      contract::ParseManifest(text->content, path);
  if (!declaration.ok()) {
    std::string reason = contract::ErrorReason(declaration.status());
    return ReportError(ctx.global.json, reason.empty() ? "MANIFEST_INVALID" : reason,
                       std::string(declaration.status().message()), kExitGeneral);
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("path").String(path);
    json.Key("valid").Bool(true).Key("kind").String(declaration->kind);
    json.Key("contract_version").String(declaration->contract_version).EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat(path, ": ok (kind ", declaration->kind, ", contract ",
                     declaration->contract_version, ")\n"));
  }
  return kExitOk;
}

}  // namespace

void AddManifestCommands(std::vector<Command>& commands) {
  commands.push_back({{"manifest", "lint"},
                      "validate an adapter.toml offline (exit 0 valid, 1 invalid, 3 not found)",
                      {{.name = "DIR_OR_FILE",
                        .help = "an adapter.toml, or a directory holding one",
                        .need = Arg::kRequired}},
                      Lint});
}

}  // namespace ktesio::cli
