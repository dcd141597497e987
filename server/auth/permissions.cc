#include "server/auth/permissions.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pitlane::auth {
namespace {

// "a viewer of its session", "an owner of its session", ...
std::string Describe(const Grant& grant) {
  const absl::string_view name = RoleName(grant.role);
  return absl::StrCat(name[0] == 'a' || name[0] == 'o' ? "an " : "a ", name, " token");
}

}  // namespace

absl::Status Authorize(const Grant& grant, Need need, absl::string_view session_id,
                       std::optional<std::uint64_t> vehicle_id, const absl::Status& not_found) {
  if (grant.role == Role::kAdmin) return absl::OkStatus();
  if (need == Need::kAdmin) {
    return absl::PermissionDeniedError(
        absl::StrCat("authorization: needs an admin token; this is ", Describe(grant)));
  }
  if (grant.session_id != session_id) return not_found;  // Not even visible.
  switch (need) {
    case Need::kRead:
      return absl::OkStatus();  // Every role of the session reads it.
    case Need::kDrive:
      if (grant.role == Role::kOwner) return absl::OkStatus();
      if (grant.role == Role::kDriver && vehicle_id.has_value() &&
          grant.vehicle_id == *vehicle_id) {
        return absl::OkStatus();
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "vehicle_id: needs the token of ",
          vehicle_id.has_value() ? absl::StrCat("vehicle ", *vehicle_id, "'s driver")
                                 : std::string("a driver"),
          " or the session's owner; this is ", Describe(grant)));
    case Need::kOwn:
      if (grant.role == Role::kOwner) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat(
          "session_id: needs the session owner's token; this is ", Describe(grant)));
    case Need::kAdmin:
      break;  // Handled above.
  }
  return absl::PermissionDeniedError("authorization: needs an admin token");
}

}  // namespace pitlane::auth
