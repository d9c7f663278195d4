#pragma once

// The shim launcher's wire format, shared by ktesio-shim and the daemon (docs/shim.md "The
// launcher"). The daemon starts one ktesio-shim in launcher mode (`ktesio-shim --launcher`, the
// socket on fd 3) and asks it for each new shim with one SOCK_SEQPACKET message: a header, then
// the shim's arguments and environment as NUL-terminated strings, with the shim's stderr and its
// handshake pipe as two SCM_RIGHTS descriptors. The launcher forks, and answers with one int32:
// the new shim's pid, or a negative errno when nothing was forked (the request was malformed:
// EPROTO; the shim's run dir does not fit in the title area: E2BIG; or fork failed), so that the
// daemon may spawn the shim itself instead. Right after it starts, the launcher sends
// kLauncherHello once, so a binary that does not speak this protocol is told apart from one that is
// slow.
//
// Header-only, POSIX and the standard library: the shim links nothing of the daemon's.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace ktesio::daemon::shim {

inline constexpr std::string_view kLauncherFlag = "--launcher";
// The launcher is started with one more argument after kLauncherFlag, only to reserve a command
// line area, which the launcher blanks (NULs) and each forked shim overwrites with its own
// command line, so that /proc/PID/cmdline names the shim's run dir as an exec'd shim's does. The
// filler's length, for a launcher at `shim_path`: as long as makes the area fill the top page of
// the launcher's stack and no more. A 64-bit Linux copies the exec'd path, then the
// environment's strings (the launcher has none), then the arguments' to the top of a new stack,
// below an 8-byte end marker; an area that starts on a page boundary costs each forked shim one
// page for its title rather than two. (Elsewhere the title may cross a page: a page more per
// shim, nothing else.) Never shorter than 511 bytes.
inline size_t LauncherFillerBytes(std::string_view shim_path, size_t page_size = 4096) {
  const size_t fixed =
      8 + (shim_path.size() + 1) + (shim_path.size() + 1) + (kLauncherFlag.size() + 1) + 1;
  return fixed + 511 <= page_size ? page_size - fixed : 511;
}
// A request larger than this is not sent: the daemon spawns the shim itself.
inline constexpr size_t kLauncherMaxRequest = 128 * 1024;
inline constexpr uint32_t kLauncherMagic = 0x4b544c31;  // "KTL1"
inline constexpr int32_t kLauncherHello = 0x4b544c48;   // "KTLH"
struct LauncherHeader {
  uint32_t magic = kLauncherMagic;
  uint32_t argc = 0;
  uint32_t envc = 0;
};

inline std::string EncodeLaunchRequest(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env) {
  LauncherHeader header;
  header.argc = static_cast<uint32_t>(argv.size());
  header.envc = static_cast<uint32_t>(env.size());
  std::string message(reinterpret_cast<const char*>(&header), sizeof(header));
  for (const std::vector<std::string>* list : {&argv, &env}) {
    for (const std::string& value : *list) {
      // An argument or variable cannot hold a NUL (exec would cut it there); cut it here alike,
      // so that the message always parses.
      message.append(value.c_str());
      message.push_back('\0');
    }
  }
  return message;
}

// Splits a request; the views point into `message`. False when it is not exactly a header and
// the number of NUL-terminated strings it announces.
inline bool DecodeLaunchRequest(std::string_view message, std::vector<std::string_view>* argv,
                                std::vector<std::string_view>* env) {
  LauncherHeader header;
  if (message.size() < sizeof(header)) {
    return false;
  }
  std::memcpy(&header, message.data(), sizeof(header));
  message.remove_prefix(sizeof(header));
  // Each string takes at least its NUL: more strings than bytes cannot be right (and bounds the
  // vectors below by the message's size).
  if (header.magic != kLauncherMagic || header.argc == 0 ||
      static_cast<uint64_t>(header.argc) + header.envc > message.size()) {
    return false;
  }
  argv->clear();
  env->clear();
  argv->reserve(header.argc);  // exactly: no outgrown buffers left behind in the launcher's heap
  env->reserve(header.envc);
  for (uint64_t i = 0; i < static_cast<uint64_t>(header.argc) + header.envc; ++i) {
    const size_t end = message.find('\0');
    if (end == std::string_view::npos) {
      return false;
    }
    (i < header.argc ? argv : env)->push_back(message.substr(0, end));
    message.remove_prefix(end + 1);
  }
  return message.empty();
}

// Whether a forked shim with these arguments can show them in the launcher's title area of
// `room` bytes: at least EXEC, `--run-dir` and the run dir itself, each with its NUL (that is
// what the daemon looks for in /proc/PID/cmdline to recognise a shim after a restart).
inline bool LaunchTitleFits(const std::vector<std::string_view>& argv, size_t room) {
  if (argv.size() < 3 || argv[1] != "--run-dir") {
    return false;
  }
  return argv[0].size() + argv[1].size() + argv[2].size() + 3 <= room;
}

}  // namespace ktesio::daemon::shim
