// The agent's process tree from /proc/<pid>/stat, environ and cmdline.

#include "process_tree.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "kit_internal.h"

namespace ktesio::tck::internal {
namespace {

// Parses "pid (comm) state ppid pgrp session ..."; comm may hold spaces and parentheses, so
// the fields after it are read from the last ')'.
bool ParseStat(const std::string& text, ProcInfo* out) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return false;
  }
  out->pid = std::atoll(text.substr(0, open).c_str());
  out->comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  rest >> state >> out->ppid >> out->pgrp >> out->session;
  if (!rest || state.empty()) {
    return false;
  }
  out->state = state[0];
  return out->pid > 0;
}

std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (char ch : text) {
    if (ch == '\0') {
      out.push_back(word);
      word.clear();
    } else {
      word += ch;
    }
  }
  if (!word.empty()) {
    out.push_back(word);
  }
  return out;
}

// `root`'s descendants by ppid, breadth first, `root` excluded.
std::vector<long long> Descendants(const std::multimap<long long, long long>& children,
                                   long long root) {
  std::vector<long long> out;
  std::vector<long long> frontier = {root};
  while (!frontier.empty()) {
    std::vector<long long> next;
    for (long long parent : frontier) {
      auto [begin, end] = children.equal_range(parent);
      for (auto it = begin; it != end; ++it) {
        out.push_back(it->second);
        next.push_back(it->second);
      }
    }
    frontier = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<ProcInfo> ListProcesses() {
  std::vector<ProcInfo> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string base = it->path().filename().string();
    if (base.empty() || base.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    ProcInfo info;
    if (ParseStat(ReadFile(it->path().string() + "/stat"), &info)) {
      out.push_back(info);
    }
  }
  return out;
}

std::vector<ProcInfo> AgentProcesses(long long agent_pid) {
  std::map<long long, ProcInfo> by_pid;
  std::multimap<long long, long long> children;
  for (const ProcInfo& p : ListProcesses()) {
    by_pid[p.pid] = p;
    children.emplace(p.ppid, p.pid);
  }
  auto agent = by_pid.find(agent_pid);
  if (agent == by_pid.end() || agent->second.state == 'Z') {
    return {};
  }
  std::vector<long long> pids = {agent_pid};
  for (long long pid : Descendants(children, agent_pid)) {
    pids.push_back(pid);
  }
  // Session members count only when the agent leads its own session (the engine launches it
  // so); otherwise the session is someone else's and its members are not the agent's.
  if (agent->second.session == agent_pid) {
    for (const auto& [pid, p] : by_pid) {
      if (p.session == agent_pid) {
        pids.push_back(pid);
      }
    }
  }
  if (auto shim = by_pid.find(agent->second.ppid);
      shim != by_pid.end() && shim->second.comm == "ktesio-shim") {
    for (long long pid : Descendants(children, shim->first)) {
      pids.push_back(pid);
    }
  }
  std::vector<ProcInfo> out;
  std::set<long long> seen;
  for (long long pid : pids) {
    const ProcInfo& p = by_pid[pid];
    if (p.state == 'Z' || !seen.insert(pid).second) {
      continue;
    }
    out.push_back(p);
  }
  return out;
}

std::string Name(const ProcInfo& p) { return "pid " + std::to_string(p.pid) + " (" + p.comm + ")"; }

std::vector<std::string> ProcEnviron(long long pid) {
  return SplitNul(ReadFile("/proc/" + std::to_string(pid) + "/environ"));
}

std::vector<std::string> ProcArgv(long long pid) {
  return SplitNul(ReadFile("/proc/" + std::to_string(pid) + "/cmdline"));
}

}  // namespace ktesio::tck::internal
