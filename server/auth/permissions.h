// Who may do what: each RPC needs a role on the session (or vehicle) it touches.
//
//   admin   everything on every session (the instructor, the operator);
//   owner   everything in its session, tokens for it included;
//   driver  Drive and SetControls for its vehicle; reads of its session;
//   viewer  reads of its session (GetSession, GetState, StreamStates).
//
// A caller who may not see a session at all is told NotFound exactly as for a session that
// does not exist, so tokens cannot be used to probe for other sessions' ids.
#ifndef PITLANE_SERVER_AUTH_PERMISSIONS_H_
#define PITLANE_SERVER_AUTH_PERMISSIONS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/auth/tokens.h"

namespace pitlane::auth {

// What an action needs, weakest first.
enum class Need {
  kRead,   // A viewer, driver or owner of the session.
  kDrive,  // The driver of the vehicle, or an owner.
  kOwn,    // The owner of the session.
  kAdmin,  // An admin (server-wide actions).
};

// Whether `grant` may act on `session_id` (and `vehicle_id`, for kDrive) as `need` says.
// OK, or: `not_found` (the caller's own NotFound for the session) if the grant gives no right
// on the session at all; PermissionDenied naming the role needed otherwise, e.g.
// "vehicle_id: needs the driver of vehicle 3 or the session's owner; this token is a viewer".
absl::Status Authorize(const Grant& grant, Need need, absl::string_view session_id,
                       std::optional<std::uint64_t> vehicle_id, const absl::Status& not_found);

}  // namespace pitlane::auth

#endif  // PITLANE_SERVER_AUTH_PERMISSIONS_H_
