#pragma once

// The shim's idle footprint. One shim runs per agent for the agent's whole life, so memory that
// only set-up or a burst of output needed must go back to the kernel, not stay resident.

#include <cstddef>

namespace ktesio::daemon::shim {

// Gives back what set-up or a burst left resident but no longer holds: free pages at the top of
// the heap (malloc_trim; free() shrinks it only past 128 KiB), with kRelease the shim's mappings
// of its own code (ReleaseCode), and the pages of the main thread's stack below the caller's frame
// (set-up runs deeper than the capture loop ever goes again).
// Call it on the main thread only, with no signal handler installed that runs on that stack (the
// shim takes its signals through a signalfd). At least a kilobyte below the releasing call's own
// frame is kept. The stack is found by address in /proc/self/maps, once; when /proc cannot be
// read, only the heap is trimmed (ReleaseCode, which needs /proc/self/pagemap, releases nothing).
enum class CodeMappings { kKeep, kRelease };
void ReleaseIdleMemory(CodeMappings code);

// Unmaps this program's read-only segments, its code and constants (MADV_DONTNEED), whole pages
// of them; returns the bytes released. The pages stay in the page cache: what runs next maps them
// back with a minor fault each (the kernel maps 64 KiB around it), no disk read. An idle shim then
// maps none of the code that set it up, and a hundred of them stop sharing ~600 KiB of it. Only
// the main program's segments (not a sanitizer build's shared libraries); none that holds a page
// a debugger or uprobe patched (an anonymous page, by /proc/self/pagemap), which would lose the
// patch; nothing when /proc/self/pagemap cannot be read.
std::size_t ReleaseCode();

// The stack part alone; returns the bytes handed back (0 when nothing lay below the margin or the
// stack could not be found). Exposed for tests.
std::size_t ReleaseStackBelowCaller();

}  // namespace ktesio::daemon::shim
