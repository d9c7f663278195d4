#pragma once

// Calls back on the engine's event loop whenever something in a directory is created, written
// or moved in (inotify; no polling), or only when one named file there is. Engine thread only.
//
// Every watch on one io_context shares a single inotify instance (an Asio service of that
// io_context): adding and removing a watch are cheap, whereas closing an inotify instance waits
// for an RCU grace period in the kernel (measured 12-20 ms on the development VM), which sat on
// the crash -> restart path when each watch had an instance of its own. Watches must be
// destroyed before their io_context.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "boost/asio/execution_context.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"

namespace ktesio::daemon::fs {

// The shared inotify instance of one io_context. Use it through DirectoryWatch.
class InotifyHub : public boost::asio::execution_context::service {
 public:
  using key_type = InotifyHub;
  static boost::asio::execution_context::id id;

  explicit InotifyHub(boost::asio::io_context& io);
  ~InotifyHub() override;

  // Registers `on_change` for `dir` (for the file `only` in it, when not empty); returns a token
  // for Remove, or 0 when the directory cannot be watched (missing, out of inotify watches).
  uint64_t Add(const std::string& dir, std::string only, std::function<void()> on_change);
  void Remove(uint64_t token);

 private:
  void shutdown() override;
  void Arm();
  void Dispatch();

  struct Subscriber {
    int wd = -1;
    std::string only;  // "" every file
    std::function<void()> on_change;
  };
  boost::asio::io_context& io_;
  int fd_ = -1;
  std::unique_ptr<boost::asio::posix::stream_descriptor> descriptor_;
  std::map<uint64_t, Subscriber> subscribers_;
  // The kernel gives one watch per directory per instance: two subscribers of one directory
  // share its wd, which is removed with the last of them. Indexed by wd, so that a batch of
  // events costs what it names, not a walk over every watch (a hundred agents starting at once
  // each cause a batch).
  std::map<int, std::set<uint64_t>> wd_subscribers_;
  uint64_t next_token_ = 1;
};

class DirectoryWatch {
 public:
  // `on_change` runs after each batch of events. A directory that cannot be watched (missing,
  // out of inotify watches) yields a watch that never fires; `ok()` tells.
  DirectoryWatch(boost::asio::io_context& io, const std::string& dir,
                 std::function<void()> on_change);
  // The same for the one file `only` in `dir`: events about its other files do not call back
  // (a run dir sees a few writes per start; each reader wants one file). A lost event (the
  // queue overflowed) still calls every watch.
  DirectoryWatch(boost::asio::io_context& io, const std::string& dir, std::string only,
                 std::function<void()> on_change);
  ~DirectoryWatch();
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  bool ok() const { return token_ != 0; }

 private:
  InotifyHub& hub_;
  uint64_t token_ = 0;
};

}  // namespace ktesio::daemon::fs
