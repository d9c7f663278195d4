#include "platform/service_host_posix.h"

#include <signal.h>

#include "server/notify.h"

namespace ktesio::daemon::platform {
namespace {

class PosixServiceHost : public ServiceHost {
 public:
  PosixServiceHost() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    signal(SIGPIPE, SIG_IGN);
  }

  Control WaitForControl() override {
    while (true) {
      int received = 0;
      if (sigwait(&signals_, &received) != 0) {
        continue;
      }
      source_ = received == SIGHUP ? "SIGHUP" : received == SIGTERM ? "SIGTERM" : "SIGINT";
      return received == SIGHUP ? Control::kReload : Control::kStop;
    }
  }

  void ReportReady() override { server::NotifyServiceManager("READY=1"); }
  void ReportStopping() override { server::NotifyServiceManager("STOPPING=1"); }
  std::string_view LastControlSource() const override { return source_; }

 private:
  sigset_t signals_;
  std::string_view source_ = "";
};

}  // namespace

std::unique_ptr<ServiceHost> MakePosixServiceHost() { return std::make_unique<PosixServiceHost>(); }

}  // namespace ktesio::daemon::platform
