#include "fs/directory_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ktesio::daemon::fs {

boost::asio::execution_context::id InotifyHub::id;

InotifyHub::InotifyHub(boost::asio::io_context& io)
    : boost::asio::execution_context::service(io), io_(io) {}

InotifyHub::~InotifyHub() { shutdown(); }

void InotifyHub::shutdown() {
  subscribers_.clear();
  wd_subscribers_.clear();
  if (descriptor_ != nullptr) {
    boost::system::error_code ignored;
    descriptor_->close(ignored);
    descriptor_.reset();
  }
  fd_ = -1;
}

uint64_t InotifyHub::Add(const std::string& dir, std::string only,
                         std::function<void()> on_change) {
  if (descriptor_ == nullptr) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) {
      return 0;
    }
    descriptor_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd_);
    Arm();
  }
  const int wd = inotify_add_watch(fd_, dir.c_str(), IN_MODIFY | IN_CREATE | IN_MOVED_TO);
  if (wd < 0) {
    return 0;
  }
  const uint64_t token = next_token_++;
  wd_subscribers_[wd].insert(token);
  subscribers_.emplace(token, Subscriber{wd, std::move(only), std::move(on_change)});
  return token;
}

void InotifyHub::Remove(uint64_t token) {
  auto it = subscribers_.find(token);
  if (it == subscribers_.end()) {
    return;
  }
  const int wd = it->second.wd;
  subscribers_.erase(it);
  auto users = wd_subscribers_.find(wd);
  if (users != wd_subscribers_.end() && users->second.erase(token) > 0 && users->second.empty()) {
    wd_subscribers_.erase(users);
    inotify_rm_watch(fd_, wd);  // asynchronous in the kernel, unlike closing the instance
  }
}

void InotifyHub::Arm() {
  descriptor_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [this](const boost::system::error_code& ec) {
                            if (ec || descriptor_ == nullptr) {
                              return;
                            }
                            Dispatch();
                            if (descriptor_ != nullptr) {
                              Arm();
                            }
                          });
}

void InotifyHub::Dispatch() {
  std::set<int> changed;                        // directories with any event
  std::set<std::pair<int, std::string>> named;  // (directory, file) of each event
  bool overflow = false;
  alignas(inotify_event) char buffer[8192];
  while (true) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      break;
    }
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        overflow = true;  // events were lost: tell every subscriber to look again
      } else if ((event->mask & IN_IGNORED) == 0) {
        changed.insert(event->wd);
        if (event->len > 0) {
          named.emplace(event->wd, std::string(event->name));  // NUL-padded to `len`
        }
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  // Callbacks may add or remove watches (their own included): collect the tokens first and
  // call each one only if it is still registered, on a copy of its callback.
  std::vector<uint64_t> due;
  if (overflow) {
    for (const auto& entry : subscribers_) {
      due.push_back(entry.first);
    }
  } else {
    for (int wd : changed) {
      auto users = wd_subscribers_.find(wd);
      if (users == wd_subscribers_.end()) {
        continue;  // its last watch was removed while its events were queued
      }
      for (uint64_t token : users->second) {
        auto it = subscribers_.find(token);
        if (it != subscribers_.end() &&
            (it->second.only.empty() || named.count({wd, it->second.only}) != 0)) {
          due.push_back(token);
        }
      }
    }
  }
  for (uint64_t token : due) {
    auto it = subscribers_.find(token);
    if (it != subscribers_.end()) {
      std::function<void()> on_change = it->second.on_change;
      on_change();
    }
  }
}

DirectoryWatch::DirectoryWatch(boost::asio::io_context& io, const std::string& dir,
                               std::function<void()> on_change)
    : DirectoryWatch(io, dir, std::string(), std::move(on_change)) {}

DirectoryWatch::DirectoryWatch(boost::asio::io_context& io, const std::string& dir,
                               std::string only, std::function<void()> on_change)
    : hub_(boost::asio::use_service<InotifyHub>(io)),
      token_(hub_.Add(dir, std::move(only), std::move(on_change))) {}

DirectoryWatch::~DirectoryWatch() {
  if (token_ != 0) {
    hub_.Remove(token_);
  }
}

}  // namespace ktesio::daemon::fs
