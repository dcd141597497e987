// Status propagation macros with the names tensorstore and Abseil's internal code use.
// Abseil 20220623 (the version gRPC links on Debian 12) does not ship them.
#ifndef PITLANE_SERVER_UTIL_STATUS_MACROS_H_
#define PITLANE_SERVER_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PITLANE_STATUS_CONCAT_INNER_(a, b) a##b
#define PITLANE_STATUS_CONCAT_(a, b) PITLANE_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                                           \
  do {                                                                  \
    if (absl::Status _pitlane_status = (expr); !_pitlane_status.ok()) { \
      return _pitlane_status;                                           \
    }                                                                   \
  } while (false)

// `ASSIGN_OR_RETURN(lhs, expr)`: evaluates `expr` (an absl::StatusOr<T>); on error returns its
// status from the enclosing function, otherwise move-assigns the value to `lhs`, which may be
// a declaration (`ASSIGN_OR_RETURN(auto x, F())`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  PITLANE_ASSIGN_OR_RETURN_IMPL_(PITLANE_STATUS_CONCAT_(_pitlane_statusor_, __LINE__), lhs, expr)

#define PITLANE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) {                                     \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = *std::move(statusor)

#endif  // PITLANE_SERVER_UTIL_STATUS_MACROS_H_
