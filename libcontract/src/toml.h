#pragma once
#pragma GCC system_header

// The one way libcontract includes toml++: exceptions off (errors are values) and compiled mode,
// so the parser implementation is instantiated in exactly one translation unit (toml.cc) while
// the other sources see declarations only. toml++ puts each configuration in its own ABI
// namespace, so other targets may still use it header-only without ODR clashes.

#define TOML_EXCEPTIONS 0
#define TOML_HEADER_ONLY 0
#define TOML_ENABLE_WINDOWS_COMPAT 0
#include <toml++/toml.h>
