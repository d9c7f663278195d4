// Section memory: attach/detach a filesystem backing and the memory.dir delivery.

#include "kit_internal.h"

namespace ktesio::tck::internal {

Kit::Outcome Kit::Memory() {
  const std::string name = NewName("memory");
  if (!subject_mode()) UseArgvWrapperIfFlags(name);
  MustRegisterAgent(name, {"--heartbeat-ms", "1000"});
  v1::AttachMemoryRequest attach;
  attach.set_name(name);
  attach.set_kind(v1::MEMORY_KIND_FILESYSTEM);
  v1::AttachMemoryResponse attached;
  grpc::Status status = agents_->AttachMemory(Ctx().get(), attach, &attached);
  if (!status.ok()) return {kFail, "AttachMemory filesystem failed: " + Describe(status)};
  const v1::MemoryBacking& memory = attached.memory();
  if (memory.kind() != v1::MEMORY_KIND_FILESYSTEM ||
      memory.guarantee() != v1::MEMORY_GUARANTEE_MANAGED_DIR_BYTE_DURABLE) {
    return {kFail, "AttachMemory filesystem answered kind " + v1::MemoryKind_Name(memory.kind()) +
                       " guarantee " + v1::MemoryGuarantee_Name(memory.guarantee()) +
                       ", expected FILESYSTEM / MANAGED_DIR_BYTE_DURABLE"};
  }
  auto mapping = d_.config.find("memory.dir");
  const bool mapped = mapping != d_.config.end();
  if (memory.declared() != mapped) {
    return {kFail, std::string("memory.declared is ") + (memory.declared() ? "true" : "false") +
                       " but memory.dir is " + (mapped ? "" : "not ") +
                       "mapped by the declaration"};
  }
  if (mapped) {
    v1::AgentInstance running = MustStartRunning(name);
    const std::string want = running.agent_home() + "/memory";
    if (!memory.dir().empty() && memory.dir() != want) {
      return {kFail, "memory dir is '" + memory.dir() + "', expected '" + want + "'"};
    }
    Delivery got = ReadDelivery(running);
    std::string problem = CheckDelivered(got, "memory.dir", mapping->second, want);
    if (!problem.empty()) return {kFail, problem};
    v1::StopAgentRequest stop;
    stop.set_name(name);
    stop.set_timeout_seconds(5);
    v1::StopAgentResponse stopped;
    status = agents_->StopAgent(Ctx(milliseconds(20000)).get(), stop, &stopped);
    if (!status.ok()) return {kFail, "StopAgent failed: " + Describe(status)};
  }
  v1::DetachMemoryRequest detach;
  detach.set_name(name);
  v1::DetachMemoryResponse detached;
  status = agents_->DetachMemory(Ctx().get(), detach, &detached);
  if (!status.ok()) return {kFail, "DetachMemory failed: " + Describe(status)};
  return {kPass, ""};
}

}  // namespace ktesio::tck::internal
