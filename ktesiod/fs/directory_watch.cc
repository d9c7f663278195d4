#include "fs/directory_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

namespace ktesio::daemon::fs {

DirectoryWatch::DirectoryWatch(boost::asio::io_context& io, const std::string& dir,
                               std::function<void()> on_change)
    : on_change_(std::move(on_change)) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    return;
  }
  if (inotify_add_watch(fd_, dir.c_str(), IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
    close(fd_);
    fd_ = -1;
    return;
  }
  descriptor_ = std::make_unique<boost::asio::posix::stream_descriptor>(io, fd_);
  Arm();
}

DirectoryWatch::~DirectoryWatch() {
  if (descriptor_ != nullptr) {
    boost::system::error_code ignored;
    descriptor_->close(ignored);
  }
}

void DirectoryWatch::Arm() {
  descriptor_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this](const boost::system::error_code& ec) {
                            if (ec) {
                              return;
                            }
                            char events[4096];
                            while (read(fd_, events, sizeof(events)) > 0) {
                            }
                            on_change_();
                            Arm();
                          });
}

}  // namespace ktesio::daemon::fs
