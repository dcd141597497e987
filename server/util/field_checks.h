// Checks of user-supplied numbers that name the field in their error.
//
// Every check returns OK or InvalidArgument("<field>: <what was expected>, got <value>").
// Non-finite values (NaN, +-inf) always fail. Callers prefix the field with its position in
// the request (see PrefixField) so that the client sees e.g. "vehicles[2].length_m".
#ifndef PITLANE_SERVER_UTIL_FIELD_CHECKS_H_
#define PITLANE_SERVER_UTIL_FIELD_CHECKS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace pitlane {

// `value` is finite.
absl::Status CheckFinite(absl::string_view field, double value);
// `value` is finite and in the closed range [lo, hi].
absl::Status CheckInRange(absl::string_view field, double value, double lo, double hi);
// `value` is finite and in the half-open range (0, hi].
absl::Status CheckPositive(absl::string_view field, double value, double hi);

// Returns `status` with "<prefix>." put in front of its message (or "<prefix>" alone when the
// message starts with '['), keeping its code. OK passes through.
absl::Status PrefixField(absl::string_view prefix, const absl::Status& status);

}  // namespace pitlane

#endif  // PITLANE_SERVER_UTIL_FIELD_CHECKS_H_
