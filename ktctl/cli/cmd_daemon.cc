// ktctl daemon ...

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/render.h"
#include "ktesio/contract/json_writer.h"

namespace ktesio::cli {
namespace {

int DaemonStatus(Context& ctx, const LocalArgs& /*args*/) {
  v1::GetStatusResponse response;
  if (const int code = ctx.Call(&Client::system, &v1::SystemService::Stub::GetStatus,
                                v1::GetStatusRequest(), &response);
      code != kExitOk) {
    return code;
  }
  Out(ctx.global.json ? StatusDocument(response) : StatusText(response));
  return kExitOk;
}

// Streams a consistent copy of the daemon's store into FILE (written to FILE.partial, fsynced,
// renamed: a failed or interrupted backup never leaves a FILE that looks complete).
int DaemonBackup(Context& ctx, const LocalArgs& args) {
  const std::string file = args.positionals[0];
  if (file.empty()) {
    return ctx.Usage("daemon backup needs a FILE to write (got an empty name)");
  }
  if (access(file.c_str(), F_OK) == 0) {
    return ctx.Fail(CallError{
        "ALREADY_EXISTS", absl::StrCat(file, " already exists; choose another name or remove it"),
        kExitGeneral});
  }
  int code = 0;
  Client* client = ctx.Connect(&code);
  if (client == nullptr) {
    return code;
  }
  const std::string partial = file + ".partial";
  int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ctx.Fail(CallError{"IO_ERROR",
                              absl::StrCat("cannot create ", partial, ": ", std::strerror(errno)),
                              kExitGeneral});
  }
  grpc::ClientContext call;  // no deadline: a large store takes as long as it takes
  std::unique_ptr<grpc::ClientReader<v1::BackupStoreResponse>> reader =
      client->system().BackupStore(&call, v1::BackupStoreRequest());
  v1::BackupStoreResponse piece;
  uint64_t written = 0;
  uint64_t total = 0;
  uint32_t schema = 0;
  bool first = true;
  std::string write_error;
  while (reader->Read(&piece)) {
    if (first) {
      total = piece.total_bytes();
      schema = piece.schema_version();
      first = false;
    }
    const std::string& data = piece.data();
    for (size_t at = 0; at < data.size() && write_error.empty();) {
      ssize_t n = write(fd, data.data() + at, data.size() - at);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        write_error = absl::StrCat("writing ", partial, " failed: ", std::strerror(errno));
        call.TryCancel();
        break;
      }
      at += static_cast<size_t>(n);
      written += static_cast<uint64_t>(n);
    }
  }
  grpc::Status status = reader->Finish();
  if (write_error.empty() && status.ok() && (written != total || fsync(fd) != 0)) {
    write_error = written != total
                      ? absl::StrCat("the copy ended after ", written, " of ", total, " bytes")
                      : absl::StrCat("fsync of ", partial, " failed: ", std::strerror(errno));
  }
  close(fd);
  if (!write_error.empty() || !status.ok()) {
    unlink(partial.c_str());
    return write_error.empty() ? ctx.Fail(status)
                               : ctx.Fail(CallError{"IO_ERROR", write_error, kExitGeneral});
  }
  if (rename(partial.c_str(), file.c_str()) != 0) {
    const std::string error = absl::StrCat("cannot rename ", partial, ": ", std::strerror(errno));
    unlink(partial.c_str());
    return ctx.Fail(CallError{"IO_ERROR", error, kExitGeneral});
  }
  if (ctx.global.json) {
    contract::JsonWriter json;
    json.BeginObject().Key("schema_version").Int(1).Key("file").String(file);
    json.Key("bytes").Uint(written).Key("store_schema_version").Uint(schema).EndObject();
    Out(json.Take() + "\n");
  } else {
    Out(absl::StrCat("backed up the store (", written, " bytes, schema version ", schema, ") to ",
                     file, "\nrestore it with: ktesiod --restore ", file, "\n"));
  }
  return kExitOk;
}

}  // namespace

void AddDaemonCommands(std::vector<Command>& commands) {
  commands.push_back({{"daemon", "status"},
                      "daemon version, API and contract versions, uptime, paths, instance counts",
                      {},
                      DaemonStatus});
  commands.push_back(
      {{"daemon", "backup"},
       "write a consistent copy of the daemon's store to FILE (while it runs)",
       {{.name = "FILE", .help = "the copy to write; must not exist yet", .need = Arg::kRequired}},
       DaemonBackup});
}

}  // namespace ktesio::cli
