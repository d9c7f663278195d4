#pragma once

// Status propagation in one line, as in Abseil-using code bases (Debian's Abseil does not ship
// the macros). Each evaluates `expr` once.
//
//   KT_RETURN_IF_ERROR(store.UpdateInstance(row));
//   KT_ASSIGN_OR_RETURN(store::InstanceRow row, Load(name));
//
// KT_RETURN_IF_ERROR returns the non-OK absl::Status of `expr` from the enclosing function;
// KT_ASSIGN_OR_RETURN does the same for an absl::StatusOr and otherwise moves its value into
// `lhs` (a declaration or an existing variable). Both need a function returning absl::Status or
// absl::StatusOr<U>. A type with a top-level comma cannot be the declared `lhs`: use `auto`.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KT_RETURN_IF_ERROR(expr)                                \
  do {                                                          \
    if (::absl::Status kt_status_ = (expr); !kt_status_.ok()) { \
      return kt_status_;                                        \
    }                                                           \
  } while (false)

#define KT_STATUS_MACROS_CONCAT_INNER(a, b) a##b
#define KT_STATUS_MACROS_CONCAT(a, b) KT_STATUS_MACROS_CONCAT_INNER(a, b)

#define KT_ASSIGN_OR_RETURN(lhs, ...) \
  KT_ASSIGN_OR_RETURN_IMPL(KT_STATUS_MACROS_CONCAT(kt_statusor_, __LINE__), lhs, __VA_ARGS__)

#define KT_ASSIGN_OR_RETURN_IMPL(statusor, lhs, ...) \
  auto statusor = (__VA_ARGS__);                     \
  if (!statusor.ok()) {                              \
    return std::move(statusor).status();             \
  }                                                  \
  lhs = std::move(statusor).value()
