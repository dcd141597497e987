// The browser viewer's HTTP API, beside its page (docs/dashboards.md):
//
//   GET  /api/sessions                          the sessions the visitor may see, as JSON
//   POST /api/sessions/<id>/pause               clock paused (REALTIME, BARRIER)
//   POST /api/sessions/<id>/resume              clock running again
//   POST /api/sessions/<id>/step?ticks=N        N ticks (1 by default; LOCKSTEP or paused)
//   POST /api/sessions/<id>/reset               back to tick 0 as created
//   GET  /api/sessions/<id>/race.csv            the results of its last race (docs/racing.md),
//   GET  /api/sessions/<id>/race.json           as GetRaceResults gives them (409: no race)
//
// The token comes as for the WebSocket (request.h). Reads need a visitor who may see the
// session; changes need the session's owner or the
// admin (any visitor with --auth=none) and are audited like the gRPC calls that do the same.
// Answers are JSON: the session after the change, or {"error": "..."} naming the field, with
// 400, 401, 403, 404, 405, 409 (the clock does not allow it), 503 (too many Steps waiting) or
// 504 (a Step that took over 10 s, stopped where it was).
#ifndef PITLANE_SERVER_WEB_VIEWER_API_H_
#define PITLANE_SERVER_WEB_VIEWER_API_H_

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/session/session_manager.h"
#include "server/web/foxglove_hub.h"

struct mg_connection;

namespace pitlane::web {

struct ViewerApiOptions {
  session::SessionManager* sessions = nullptr;  // Must outlive the API.
  // Null: every visitor may do everything (--auth=none).
  Authenticator authenticate;
  // Writes one audit line: the client's address, the action ("clock.set", "session.reset",
  // "session.step"), who (Visitor::Who) and key=value fields.
  std::function<void(absl::string_view peer, absl::string_view action,
                     const std::vector<std::pair<std::string, std::string>>& fields)>
      audit;
  // Called after a session was reset (the gRPC layer ends its drivers' streams).
  std::function<void(absl::string_view session_id)> after_reset;
};

class ViewerApi {
 public:
  // Steps over HTTP waited for at once (503 beyond), and how long each is waited for before
  // it is cancelled (504, the ticks made stay made).
  static constexpr int kMaxWaitingSteps = 4;
  static constexpr absl::Duration kStepWait = absl::Seconds(10);

  explicit ViewerApi(ViewerApiOptions options) : options_(std::move(options)) {}
  // civetweb's request handler for /api/ (the API is its user data).
  static int Handle(mg_connection* connection, void* api);

 private:
  int Serve(mg_connection* connection);
  // GET /api/sessions/<id>/race.csv and race.json: the race's results (docs/racing.md).
  int ServeRace(mg_connection* connection, const Visitor* visitor, absl::string_view id,
                absl::string_view action);
  const ViewerApiOptions options_;
  std::atomic<int> steps_waiting_{0};
};

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_VIEWER_API_H_
