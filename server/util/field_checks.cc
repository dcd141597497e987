#include "server/util/field_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pitlane {

absl::Status CheckFinite(absl::string_view field, double value) {
  if (std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be finite, got ", value));
}

absl::Status CheckInRange(absl::string_view field, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be in [", lo, ", ", hi, "], got ", value));
}

absl::Status CheckPositive(absl::string_view field, double value, double hi) {
  if (std::isfinite(value) && value > 0.0 && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be in (0, ", hi, "], got ", value));
}

absl::Status PrefixField(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  const absl::string_view message = status.message();
  const absl::string_view separator = (!message.empty() && message.front() == '[') ? "" : ".";
  return absl::Status(status.code(), absl::StrCat(prefix, separator, message));
}

}  // namespace pitlane
