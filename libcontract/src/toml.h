#pragma once
#pragma GCC system_header

// The one way libcontract includes toml++: exceptions off (errors are values) and compiled mode,
// so the parser implementation is instantiated in exactly one translation unit (toml.cc) while
// the other sources see declarations only. toml++ puts each configuration in its own ABI
// namespace, so other targets may still use it header-only without ODR clashes.

//
// TOML_ASSERT is disabled in every build type: toml++ 3.3 asserts instead of reporting an error
// on some malformed table headers (e.g. "[#x]" or a control character after '['), which the
// fuzzer found; with the assertion compiled out, the parser's own error path reports a syntax
// error, as it already does in NDEBUG builds.

#define TOML_ASSERT(expr) static_assert(true)
#define TOML_EXCEPTIONS 0
#define TOML_HEADER_ONLY 0
#define TOML_ENABLE_WINDOWS_COMPAT 0
#include <toml++/toml.h>
