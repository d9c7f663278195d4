#pragma once

// Calls back on the engine's event loop whenever something in a directory is created, written
// or moved in (inotify; no polling). Engine thread only.

#include <functional>
#include <memory>
#include <string>

#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"

namespace ktesio::daemon::fs {

class DirectoryWatch {
 public:
  // `on_change` runs after each batch of events. A directory that cannot be watched (missing,
  // out of inotify watches) yields a watch that never fires; `ok()` tells.
  DirectoryWatch(boost::asio::io_context& io, const std::string& dir,
                 std::function<void()> on_change);
  ~DirectoryWatch();
  DirectoryWatch(const DirectoryWatch&) = delete;
  DirectoryWatch& operator=(const DirectoryWatch&) = delete;

  bool ok() const { return descriptor_ != nullptr; }

 private:
  void Arm();

  int fd_ = -1;
  std::function<void()> on_change_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> descriptor_;
};

}  // namespace ktesio::daemon::fs
