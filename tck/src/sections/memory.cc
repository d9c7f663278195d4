// Section memory: attach/detach a filesystem backing and the memory.dir delivery.

#include "kit_internal.h"
#include "ktesio/contract/status_macros.h"

namespace ktesio::tck::internal {

absl::StatusOr<Kit::Outcome> Kit::Memory() {
  const std::string name = NewName("memory");
  if (!subject_mode()) {
    UseArgvWrapperIfFlags(name);
  }
  KT_RETURN_IF_ERROR(RegisterAgent(name, {"--heartbeat-ms", "1000"}));
  v1::AttachMemoryRequest attach;
  attach.set_name(name);
  attach.set_kind(v1::MEMORY_KIND_FILESYSTEM);
  v1::AttachMemoryResponse attached;
  grpc::Status status = agents_->AttachMemory(Ctx().get(), attach, &attached);
  if (!status.ok()) {
    return Outcome{kFail, "AttachMemory filesystem failed: " + Describe(status)};
  }
  const v1::MemoryBacking& memory = attached.memory();
  if (memory.kind() != v1::MEMORY_KIND_FILESYSTEM ||
      memory.guarantee() != v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE) {
    return Outcome{kFail, "AttachMemory filesystem answered kind " +
                              v1::MemoryKind_Name(memory.kind()) + " guarantee " +
                              v1::MemoryGuarantee_Name(memory.guarantee()) +
                              ", expected FILESYSTEM / MANAGED_DIR_BYTE_DURABLE"};
  }
  auto mapping = d_.config.find("memory.dir");
  const bool mapped = mapping != d_.config.end();
  if (memory.declared() != mapped) {
    return Outcome{kFail, std::string("memory.declared is ") +
                              (memory.declared() ? "true" : "false") + " but memory.dir is " +
                              (mapped ? "" : "not ") + "mapped by the declaration"};
  }
  if (mapped) {
    KT_ASSIGN_OR_RETURN(const Outcome delivered,
                        MemoryDirDelivered(name, memory.dir(), mapping->second));
    if (delivered.first != kPass) {
      return delivered;
    }
  }
  v1::DetachMemoryRequest detach;
  detach.set_name(name);
  v1::DetachMemoryResponse detached;
  status = agents_->DetachMemory(Ctx().get(), detach, &detached);
  if (!status.ok()) {
    return Outcome{kFail, "DetachMemory failed: " + Describe(status)};
  }
  return Outcome{kPass, ""};
}

// The mapped memory.dir: the started agent receives <agent_home>/memory through `target` (and
// the attached `dir`, when reported, is that directory); then it stops.
absl::StatusOr<Kit::Outcome> Kit::MemoryDirDelivered(const std::string& name,
                                                     const std::string& dir,
                                                     const c::ConfigTarget& target) {
  KT_ASSIGN_OR_RETURN(const v1::AgentInstance running, StartRunning(name));
  const std::string want = running.agent_home() + "/memory";
  if (!dir.empty() && dir != want) {
    return Outcome{kFail, "memory dir is '" + dir + "', expected '" + want + "'"};
  }
  KT_ASSIGN_OR_RETURN(const Delivery got, ReadDelivery(running));
  std::string problem = CheckDelivered(got, "memory.dir", target, want);
  if (!problem.empty()) {
    return Outcome{kFail, problem};
  }
  KT_RETURN_IF_ERROR(Stop(name));
  return Outcome{kPass, ""};
}

}  // namespace ktesio::tck::internal
