// Windows service host: the Service Control Manager dispatcher with a console fallback, both
// delivering controls through the portable ServiceHost seam. Compiled by the mingw-w64 check
// (packaging/windows-service/check.sh); see README.md for what is and is not tested.

#include "service_host_win.h"

#include <windows.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string_view>

namespace ktesio::daemon::platform {
namespace {

// A thread-safe queue of controls: the SCM handler and the console handler run on threads of
// their own and only enqueue; the daemon's main loop dequeues in WaitForControl.
class ControlQueue {
 public:
  void Push(Control control, std::string_view source) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({control, source});
    }
    cv_.notify_one();
  }
  Control Pop(std::string_view* source) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty(); });
    Entry entry = queue_.front();
    queue_.pop_front();
    *source = entry.source;
    return entry.control;
  }

 private:
  struct Entry {
    Control control;
    std::string_view source;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
};

// ---- Service mode -------------------------------------------------------------------------

class ScmHost : public ServiceHost {
 public:
  // Attached once RegisterServiceCtrlHandlerExW returned the handle (the handler gets this
  // host as its context); from then on the SCM sees SERVICE_START_PENDING.
  void Attach(SERVICE_STATUS_HANDLE handle) {
    handle_ = handle;
    status_.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    Report(SERVICE_START_PENDING, NO_ERROR, 0, 30000);
  }

  Control WaitForControl() override { return queue_.Pop(&source_); }
  void ReportReady() override { Report(SERVICE_RUNNING, NO_ERROR, 0, 0); }
  // The daemon drains its work (gRPC server up to 5 s, engine); ask the SCM for 30 s.
  void ReportStopping() override { Report(SERVICE_STOP_PENDING, NO_ERROR, 0, 30000); }
  std::string_view LastControlSource() const override { return source_; }

  void Stopped(int exit_code) {
    if (exit_code == 0) {
      Report(SERVICE_STOPPED, NO_ERROR, 0, 0);
    } else {
      Report(SERVICE_STOPPED, ERROR_SERVICE_SPECIFIC_ERROR, static_cast<DWORD>(exit_code), 0);
    }
  }

  // Runs on the SCM's handler thread.
  DWORD Handle(DWORD control) {
    switch (control) {
      case SERVICE_CONTROL_STOP:
        queue_.Push(Control::kStop, "service stop");
        return NO_ERROR;
      case SERVICE_CONTROL_SHUTDOWN:
      case SERVICE_CONTROL_PRESHUTDOWN:
        queue_.Push(Control::kStop, "system shutdown");
        return NO_ERROR;
      case SERVICE_CONTROL_PARAMCHANGE:
        queue_.Push(Control::kReload, "service paramchange");
        return NO_ERROR;
      case SERVICE_CONTROL_INTERROGATE:
        return NO_ERROR;
      default:
        return ERROR_CALL_NOT_IMPLEMENTED;
    }
  }

 private:
  void Report(DWORD state, DWORD win32_exit, DWORD specific_exit, DWORD wait_hint_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    status_.dwCurrentState = state;
    status_.dwWin32ExitCode = win32_exit;
    status_.dwServiceSpecificExitCode = specific_exit;
    status_.dwWaitHint = wait_hint_ms;
    status_.dwControlsAccepted =
        state == SERVICE_RUNNING
            ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN | SERVICE_ACCEPT_PARAMCHANGE
            : 0;
    status_.dwCheckPoint =
        (state == SERVICE_RUNNING || state == SERVICE_STOPPED) ? 0 : ++checkpoint_;
    if (handle_ != nullptr) {
      SetServiceStatus(handle_, &status_);
    }
  }

  SERVICE_STATUS_HANDLE handle_ = nullptr;
  std::mutex mu_;
  SERVICE_STATUS status_{};
  DWORD checkpoint_ = 0;
  ControlQueue queue_;
  std::string_view source_ = "";
};

// StartServiceCtrlDispatcherW takes plain function pointers: the body and the exit code travel
// through these process-wide slots (one service per process).
const ServiceBody* g_body = nullptr;
int g_exit_code = 0;

DWORD WINAPI HandlerEx(DWORD control, DWORD /*event_type*/, LPVOID /*event_data*/, LPVOID context) {
  return static_cast<ScmHost*>(context)->Handle(control);
}

void WINAPI ServiceMain(DWORD /*argc*/, LPWSTR* /*argv*/) {
  ScmHost host;
  SERVICE_STATUS_HANDLE handle = RegisterServiceCtrlHandlerExW(kServiceName, HandlerEx, &host);
  if (handle == nullptr) {
    g_exit_code = 1;
    return;
  }
  host.Attach(handle);
  g_exit_code = (*g_body)(host);
  host.Stopped(g_exit_code);
}

// ---- Console mode -------------------------------------------------------------------------

ControlQueue* g_console_queue = nullptr;

BOOL WINAPI ConsoleHandler(DWORD event) {
  if (g_console_queue == nullptr) {
    return FALSE;
  }
  switch (event) {
    case CTRL_C_EVENT:
      g_console_queue->Push(Control::kStop, "console Ctrl-C");
      return TRUE;
    case CTRL_BREAK_EVENT:
      g_console_queue->Push(Control::kStop, "console Ctrl-Break");
      return TRUE;
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT:
      g_console_queue->Push(Control::kStop, "console close");
      // Returning from these ends the process; give the daemon its drain time first.
      Sleep(5000);
      return TRUE;
    default:
      return FALSE;
  }
}

class ConsoleHost : public ServiceHost {
 public:
  ConsoleHost() {
    g_console_queue = &queue_;
    SetConsoleCtrlHandler(ConsoleHandler, TRUE);
  }
  ~ConsoleHost() override {
    SetConsoleCtrlHandler(ConsoleHandler, FALSE);
    g_console_queue = nullptr;
  }
  Control WaitForControl() override { return queue_.Pop(&source_); }
  void ReportReady() override {}
  void ReportStopping() override {}
  std::string_view LastControlSource() const override { return source_; }

 private:
  ControlQueue queue_;
  std::string_view source_ = "";
};

}  // namespace

int RunServiceOrConsole(const ServiceBody& body, bool force_console) {
  if (!force_console) {
    g_body = &body;
    wchar_t name[] = L"ktesiod";
    SERVICE_TABLE_ENTRYW table[] = {{name, ServiceMain}, {nullptr, nullptr}};
    if (StartServiceCtrlDispatcherW(table)) {
      return g_exit_code;  // ServiceMain ran to completion
    }
    if (GetLastError() != ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) {
      return 1;
    }
    // Not started by the SCM: an operator ran it from a console.
  }
  ConsoleHost host;
  return body(host);
}

}  // namespace ktesio::daemon::platform
