#include "launcher.h"

#include <alloca.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "footprint.h"
#include "io.h"
#include "launcher_protocol.h"
#include "spawn.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, no header declares it

namespace ktesio::daemon::shim {
namespace {

constexpr size_t kFdsPerRequest = 2;  // the shim's stderr, its handshake pipe
constexpr int kReleaseCodeAfterMs = 1000;

bool SendAnswer(int control_fd, int32_t answer) {
  for (;;) {
    if (send(control_fd, &answer, sizeof(answer), MSG_NOSIGNAL) == sizeof(answer)) {
      return true;
    }
    if (errno != EINTR) {
      return false;
    }
  }
}

// The launcher's command line area: where main()'s argument strings lie, contiguous from
// argv[0] to the last one's NUL, and how much of it the launcher's own title uses.
struct TitleArea {
  char* begin = nullptr;
  size_t size = 0;
  size_t used = 0;
};

TitleArea FindTitleArea(int argc, char** argv) {
  TitleArea area;
  if (argc < 1) {
    return area;
  }
  area.begin = argv[0];
  char* end = argv[argc - 1] + std::strlen(argv[argc - 1]) + 1;
  for (int i = 0; i < argc; ++i) {
    if (argv[i] < area.begin || argv[i] >= end) {
      return {};  // not the kernel's contiguous layout: show no title rather than write astray
    }
  }
  area.size = static_cast<size_t>(end - area.begin);
  area.used = std::strlen(argv[0]) + 1 + (argc > 1 ? std::strlen(argv[1]) + 1 : 0);
  // What follows the flag only reserves room: the daemon passes it as one argument of filler,
  // blanked here (NULs), so that the launcher's own command line reads as its path and flag.
  std::memset(area.begin + area.used, 0, area.size - area.used);
  return area;
}

// In the forked shim: its own arguments over the launcher's, whole ones while they fit (the
// parent checked that EXEC, --run-dir and the run dir do), and NULs over what is left of the
// launcher's title. The rest of the area was NULs from the start (empty arguments).
void WriteTitle(const TitleArea& area, std::string_view exec,
                const std::vector<std::string_view>& args) {
  size_t used = 0;
  const auto put = [&](std::string_view arg) {
    if (used + arg.size() + 1 > area.size) {
      return false;
    }
    std::memcpy(area.begin + used, arg.data(), arg.size());
    area.begin[used + arg.size()] = '\0';
    used += arg.size() + 1;
    return true;
  };
  if (put(exec)) {
    for (std::string_view arg : args) {
      if (!put(arg)) {
        break;
      }
    }
  }
  if (used < area.used) {
    std::memset(area.begin + used, 0, area.used - used);
  }
}

// In the forked shim: the process an exec'd shim starts as (a new session, default signal
// dispositions, an empty mask, stderr and the handshake pipe on fds 2 and 3, nothing else open),
// then the shim itself.
[[noreturn]] void RunForkedShim(const TitleArea& area, std::string_view exec,
                                const std::vector<std::string_view>& args,
                                std::vector<char*>& env_pointers,
                                const std::array<int, kFdsPerRequest>& fds, ShimEntry entry) {
  ResetSignals();
  setsid();
  if (dup2(fds[0], STDERR_FILENO) < 0 || dup2(fds[1], 3) < 0) {
    _exit(127);
  }
  CloseOtherFds(3);  // the request's own descriptors; the socket was fd 3 before the dup2
  WriteTitle(area, exec, args);
  // The agent inherits the shim's environment (execvp uses environ): the one in the request.
  environ = env_pointers.data();
  std::exit(entry(args));
}

// The launcher proper (RunLauncher places its stack first).
[[gnu::noinline]] int ServeLaunches(int control_fd, int argc, char** argv, ShimEntry entry) {
  // Forked shims are reaped by the kernel (the daemon watches them through pidfds, as it does a
  // shim it adopted); a daemon gone mid-answer is a failed send, not a SIGPIPE.
  signal(SIGCHLD, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  const TitleArea area = FindTitleArea(argc, argv);
  if (!SendAnswer(control_fd, kLauncherHello)) {
    Report(ErrnoMessage("--launcher: cannot greet the daemon on fd " + std::to_string(control_fd),
                        errno));
    return 1;
  }
  bool code_mapped = true;
  for (;;) {
    // Idle for a second after the last request: the code is unmapped (it stays in the page
    // cache), as each shim's is once set up (footprint.h). A burst of launches never waits on it.
    if (code_mapped) {
      pollfd ready{control_fd, POLLIN, 0};
      int polled = 0;
      while ((polled = poll(&ready, 1, kReleaseCodeAfterMs)) < 0 && errno == EINTR) {
      }
      if (polled == 0) {
        ReleaseCode();
        code_mapped = false;
      }
    }
    // The size first, so that a request is read whole into a buffer of its size.
    const ssize_t size = recv(control_fd, nullptr, 0, MSG_PEEK | MSG_TRUNC);
    // The daemon closed its end (it never sends an empty request), or closed it or died with an
    // answer unread (a reset): either way there is nobody left to fork for.
    if (size == 0 || (size < 0 && errno == ECONNRESET)) {
      return 0;
    }
    if (size < 0) {
      if (errno == EINTR) {
        continue;
      }
      Report(ErrnoMessage("--launcher: recv", errno));
      return 1;
    }
    code_mapped = true;
    std::string request(static_cast<size_t>(size), '\0');
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kFdsPerRequest)> control{};
    iovec iov{request.data(), request.size()};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    const ssize_t got = recvmsg(control_fd, &message, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == ECONNRESET) {
        return 0;  // as above
      }
      Report(ErrnoMessage("--launcher: recvmsg", errno));
      return 1;
    }
    std::vector<int> received;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd = -1;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          received.push_back(fd);
        }
      }
    }
    std::vector<std::string_view> shim_argv;
    std::vector<std::string_view> shim_env;
    int32_t answer = 0;
    if (got != size || (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
        received.size() != kFdsPerRequest || !DecodeLaunchRequest(request, &shim_argv, &shim_env)) {
      answer = -EPROTO;
    } else if (!LaunchTitleFits(shim_argv, area.size)) {
      answer = -E2BIG;
    } else {
      // What the shim needs is made here, before the fork: the pages it lies in are the
      // launcher's, shared, where the shim's own allocations would be pages of its own. The
      // environment's pointers point into `request`, whose NUL-terminated strings, like these
      // vectors, live in the shim as long as it does (std::exit never unwinds this frame).
      const std::string_view exec = shim_argv.front();
      shim_argv.erase(shim_argv.begin());  // in place: the shim's arguments, after argv[0]
      std::vector<char*> env_pointers;
      env_pointers.reserve(shim_env.size() + 1);
      for (std::string_view value : shim_env) {
        env_pointers.push_back(const_cast<char*>(value.data()));
      }
      env_pointers.push_back(nullptr);
      const pid_t pid = fork();
      if (pid == 0) {
        RunForkedShim(area, exec, shim_argv, env_pointers, {received[0], received[1]}, entry);
      }
      answer = pid > 0 ? pid : -errno;
    }
    for (int fd : received) {
      close(fd);
    }
    if (!SendAnswer(control_fd, answer)) {
      return 0;  // the daemon is gone; a shim forked for it finds its handshake pipe closed
    }
  }
}

}  // namespace

int RunLauncher(int control_fd, int argc, char** argv, ShimEntry entry) {
  // A forked shim writes the stack from the frame it was forked in down to its capture loop's,
  // about 2 KiB, and each page of that is a private copy. Where in a page that frame lies is up
  // to the kernel's random stack offset: two pages as often as one. So the launcher serves from
  // a frame placed just below the top of a page, and every shim's frames fit in that one page.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  constexpr uintptr_t kHeadroom = 128;  // ServeLaunches's own call and saved registers
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const uintptr_t pad = (here & (page - 1)) + kHeadroom;
  void* skipped = alloca(pad);  // never written: the frame below starts at the page's top
  asm volatile("" : : "r"(skipped) : "memory");
  return ServeLaunches(control_fd, argc, argv, entry);
}

}  // namespace ktesio::daemon::shim
