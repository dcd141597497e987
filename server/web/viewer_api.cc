#include "server/web/viewer_api.h"

#include <civetweb.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/util/json_text.h"
#include "server/web/frame_json.h"
#include "server/web/request.h"

namespace pitlane::web {
namespace {

int RespondJson(mg_connection* connection, int status, absl::string_view reason,
                absl::string_view body, absl::string_view extra_headers = "") {
  return Respond(connection, status, reason, "application/json", body, extra_headers);
}

void AppendSession(const session::Session& session, bool may_control, std::string* out) {
  const session::SessionDescription description = session.Describe(/*with_vehicles=*/false);
  out->append("{\"id\":");
  json::AppendString(description.id, out);
  out->append(",\"name\":");
  json::AppendString(description.config.name, out);
  out->append(",\"clock_mode\":\"");
  out->append(ClockModeName(description.config.clock.mode));
  out->append("\",\"paused\":");
  out->append(description.config.clock.paused ? "true" : "false");
  out->append(",\"real_time_factor\":");
  json::AppendNumber(description.config.clock.real_time_factor, out);
  out->append(",\"tick_rate_hz\":");
  json::AppendNumber(description.config.world.tick_rate_hz, out);
  out->append(",\"tick\":");
  json::AppendInteger(description.time.tick, out);
  out->append(",\"sim_time_s\":");
  json::AppendNumber(description.time.sim_time_s, out);
  out->append(",\"vehicles\":");
  json::AppendInteger(static_cast<std::uint64_t>(description.vehicle_count), out);
  out->append(",\"obstacles\":");
  json::AppendInteger(static_cast<std::uint64_t>(description.obstacle_count), out);
  out->append(",\"max_ticks_per_step\":");
  json::AppendInteger(static_cast<std::uint64_t>(session.max_ticks_per_step()), out);
  out->append(",\"may_control\":");
  out->append(may_control ? "true" : "false");
  if (description.playback.has_value()) {
    const session::PlaybackPosition& playback = *description.playback;
    out->append(",\"playback\":{\"recording_id\":");
    json::AppendString(playback.recording, out);
    out->append(",\"position_s\":");
    json::AppendNumber(static_cast<double>(playback.position_ns) * 1e-9, out);
    out->append(",\"duration_s\":");
    json::AppendNumber(static_cast<double>(playback.duration_ns) * 1e-9, out);
    out->append(",\"frame\":");
    json::AppendInteger(static_cast<std::uint64_t>(playback.frame), out);
    out->append(",\"frame_count\":");
    json::AppendInteger(static_cast<std::uint64_t>(playback.frame_count), out);
    out->push_back('}');
  }
  out->push_back('}');
}

// A query parameter that must be a finite number in [min, max]: InvalidArgument naming it.
absl::StatusOr<double> NumberParameter(const RequestQuery& query, absl::string_view name,
                                       double min, double max) {
  const std::optional<absl::string_view> text = query.Get(name);
  double value = 0.0;
  if (!text.has_value() || !absl::SimpleAtod(*text, &value) || !std::isfinite(value) ||
      value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": must be a number in [", min, ", ", max, "]"));
  }
  return value;
}

}  // namespace

int ViewerApi::Handle(mg_connection* connection, void* api) {
  return static_cast<ViewerApi*>(api)->Serve(connection);
}

int ViewerApi::Serve(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr || request->local_uri == nullptr) return 0;
  const RequestQuery query(request->query_string);
  absl::StatusOr<std::unique_ptr<Visitor>> authenticated =
      VisitorOf(options_.authenticate, connection);
  if (!authenticated.ok()) return RespondError(connection, authenticated.status());
  const std::unique_ptr<Visitor> visitor = *std::move(authenticated);
  const absl::string_view method = request->request_method;
  absl::string_view path = request->local_uri;
  if (!absl::ConsumePrefix(&path, "/api/sessions")) {
    return RespondError(connection, absl::NotFoundError("path: no such API"));
  }
  if (path.empty() || path == "/") {
    if (method != "GET" && method != "HEAD") {
      return RespondJson(connection, 405, "Method Not Allowed",
                         "{\"error\":\"method: GET /api/sessions\"}\n", "Allow: GET, HEAD\r\n");
    }
    std::string body = "{\"sessions\":[";
    bool first = true;
    for (const std::shared_ptr<session::Session>& session : options_.sessions->List()) {
      if (visitor != nullptr && !visitor->MaySee(session->id())) continue;
      if (!first) body.push_back(',');
      first = false;
      AppendSession(*session, visitor == nullptr || visitor->MayControl(session->id()).ok(), &body);
    }
    body.append("]}\n");
    return RespondJson(connection, 200, "OK", body);
  }
  // /<id>/<action>
  const std::vector<absl::string_view> parts = absl::StrSplit(path.substr(1), '/');
  if (parts.size() != 2) return RespondError(connection, absl::NotFoundError("path: no such API"));
  const absl::string_view id = parts[0];
  const absl::string_view action = parts[1];
  if (action == "race.csv" || action == "race.json") return ServeRace(connection, visitor.get(), id, action);
  if (action != "pause" && action != "resume" && action != "step" && action != "reset" &&
      action != "speed" && action != "seek") {
    return RespondError(connection, absl::NotFoundError(
        "action: one of pause, resume, step, reset, speed, seek (POST), race.csv, race.json (GET)"));
  }
  if (method != "POST") {
    return RespondJson(connection, 405, "Method Not Allowed",
                       "{\"error\":\"method: POST changes a session\"}\n", "Allow: POST\r\n");
  }
  // Only the server's own pages may change a session (request.h).
  if (const absl::Status same = CheckSameOrigin(connection); !same.ok()) {
    return RespondError(connection, same);
  }
  // Allowed first: a session the visitor may not change is not even looked up (which would
  // count as activity and keep it from being reaped).
  if (visitor != nullptr) {
    if (const absl::Status allowed = visitor->MayControl(id); !allowed.ok()) {
      return RespondError(connection, allowed);
    }
  }
  absl::StatusOr<std::shared_ptr<session::Session>> found = options_.sessions->Find(id);
  if (!found.ok()) return RespondError(connection, found.status());
  const std::shared_ptr<session::Session>& session = *found;
  const std::string who = visitor != nullptr ? visitor->Who() : "anyone";
  const std::string peer = PeerOf(*request);
  std::vector<std::pair<std::string, std::string>> fields = {{"by", who},
                                                             {"session", session->id()}};
  if (action == "pause" || action == "resume" || action == "speed") {
    session::ClockUpdate update;
    if (action == "speed") {
      // 0: as fast as the workers can.
      absl::StatusOr<double> factor = NumberParameter(query, "real_time_factor", 0.0,
                                                      session::kMaxRealTimeFactor);
      if (!factor.ok()) return RespondError(connection, factor.status());
      update.real_time_factor = *factor;
    } else {
      update.paused = action == "pause";
    }
    absl::StatusOr<session::ClockSettings> clock = session->SetClock(update);
    if (!clock.ok()) return RespondError(connection, clock.status());
    fields.emplace_back("paused", clock->paused ? "true" : "false");
    fields.emplace_back("real_time_factor", absl::StrCat(clock->real_time_factor));
    if (options_.audit) options_.audit(peer, "clock.set", fields);
  } else if (action == "seek") {
    absl::StatusOr<double> time_s = NumberParameter(query, "time_s", 0.0, 1e9);
    if (!time_s.ok()) return RespondError(connection, time_s.status());
    absl::StatusOr<session::PlaybackPosition> position =
        session->Seek(static_cast<std::uint64_t>(*time_s * 1e9));
    if (!position.ok()) return RespondError(connection, position.status());
    fields.emplace_back("time_s", absl::StrCat(*time_s));
    if (options_.audit) options_.audit(peer, "playback.seek", fields);
  } else if (action == "reset") {
    absl::StatusOr<std::shared_ptr<const session::Frame>> frame = session->Reset();
    if (!frame.ok()) return RespondError(connection, frame.status());
    if (options_.after_reset) options_.after_reset(session->id());
    fields.emplace_back("vehicles", absl::StrCat((*frame)->vehicles.size()));
    if (options_.audit) options_.audit(peer, "session.reset", fields);
  } else {
    std::uint32_t ticks = 1;
    if (const std::optional<absl::string_view> text = query.Get("ticks")) {
      if (!absl::SimpleAtoi(*text, &ticks) || ticks < 1 || ticks > session->max_ticks_per_step()) {
        return RespondError(connection, absl::InvalidArgumentError(absl::StrCat(
            "ticks: must be an integer in [1, ", session->max_ticks_per_step(), "]")));
      }
    }
    // On the session's workers, like a client's Step; this thread waits for it, for a while:
    // it is one of the endpoint's threads, so few wait at once and none for long.
    if (steps_waiting_.fetch_add(1) >= kMaxWaitingSteps) {
      steps_waiting_.fetch_sub(1);
      return RespondError(connection, absl::UnavailableError(absl::StrCat(
          "step: ", kMaxWaitingSteps, " Steps over HTTP are running; try again")));
    }
    struct Outcome {
      absl::Notification done;
      absl::Status status;
    };
    // Shared with the callback, which may run after this handler gave up waiting.
    auto outcome = std::make_shared<Outcome>();
    absl::StatusOr<std::shared_ptr<session::StepTicket>> ticket = session->StartStep(
        ticks, std::nullopt, [outcome](absl::StatusOr<session::StepResult> result) {
          outcome->status = result.status();
          outcome->done.Notify();
        });
    if (!ticket.ok()) {
      steps_waiting_.fetch_sub(1);
      return RespondError(connection, ticket.status());
    }
    const bool finished = outcome->done.WaitForNotificationWithTimeout(kStepWait);
    if (!finished) {
      // Stop it between two ticks; the ticks made stay made.
      (*ticket)->Cancel();
      outcome->done.WaitForNotification();
    }
    steps_waiting_.fetch_sub(1);
    if (!finished) {
      return RespondError(connection, absl::DeadlineExceededError(absl::StrCat(
          "ticks: the Step took longer than ", absl::FormatDuration(kStepWait),
          " and was stopped at tick ", session->Now().tick, "; step fewer ticks")));
    }
    if (!outcome->status.ok()) return RespondError(connection, outcome->status);
    fields.emplace_back("ticks", absl::StrCat(ticks));
    if (options_.audit) options_.audit(peer, "session.step", fields);
  }
  std::string body;
  AppendSession(*session, true, &body);
  body.push_back('\n');
  return RespondJson(connection, 200, "OK", body);
}

int ViewerApi::ServeRace(mg_connection* connection, const Visitor* visitor, absl::string_view id,
                         absl::string_view action) {
  const absl::string_view method = mg_get_request_info(connection)->request_method;
  if (method != "GET" && method != "HEAD") {
    return RespondJson(connection, 405, "Method Not Allowed",
                       "{\"error\":\"method: GET reads a race's results\"}\n",
                       "Allow: GET, HEAD\r\n");
  }
  // Seen first: a session the visitor may not see is not even looked up.
  if (visitor != nullptr && !visitor->MaySee(id)) {
    return RespondError(connection, absl::NotFoundError("session_id: no such session"));
  }
  absl::StatusOr<std::shared_ptr<session::Session>> found = options_.sessions->Find(id);
  if (!found.ok()) return RespondError(connection, found.status());
  const absl::StatusOr<session::RaceReport> race = (*found)->Race();
  if (!race.ok()) return RespondError(connection, race.status());
  const bool csv = action == "race.csv";
  // A download named after the session (its id is the server's: safe in a header).
  const std::string headers =
      absl::StrCat("Content-Disposition: attachment; filename=\"race-", race->session_id,
                   csv ? ".csv" : ".json", "\"\r\n");
  if (csv) {
    return Respond(connection, 200, "OK", "text/csv; charset=utf-8",
                   session::RaceResultsCsv(*race), headers);
  }
  return RespondJson(connection, 200, "OK", session::RaceResultsJson(*race) + "\n", headers);
}

}  // namespace pitlane::web
