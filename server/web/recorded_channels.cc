#include "server/web/recorded_channels.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/web/foxglove_hub.h"

namespace pitlane::web {
namespace {

record::ChannelSpec JsonChannel(std::string topic, const char* schema_name,
                                const std::string& schema) {
  return {.topic = std::move(topic),
          .message_encoding = "json",
          .schema_name = schema_name,
          .schema_encoding = "jsonschema",
          .schema = schema};
}

}  // namespace

void RecordedChannels::Write(const session::Delivery& delivery, std::uint64_t time_ns,
                             record::RecordingOutput& out) {
  const session::Frame& frame = *delivery.frame;
  const std::string& id = session_->id();
  // The look (bodies, names, the map) again after a reset, every kLookRefresh_ns of the
  // recording's time (obstacles come and go), or for a vehicle new to it, unless it was
  // looked for already: the writer runs behind the session, and a vehicle removed since is
  // in no look.
  bool stale = look_ == nullptr || delivery.first_frame || time_ns - look_ns_ >= kLookRefresh_ns;
  for (std::size_t i = 0; !stale && i < frame.vehicles.size(); ++i) {
    const sim::VehicleId vehicle = frame.vehicles[i].id;
    stale = !look_->vehicles.contains(vehicle) && !looked_for_.contains(vehicle);
  }
  if (stale) {
    look_ = std::make_shared<const SessionLook>(LookOf(session_->Describe(/*with_vehicles=*/true)));
    look_ns_ = time_ns;
    looked_for_.clear();
    for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
      if (!look_->vehicles.contains(vehicle.id)) looked_for_.insert(vehicle.id);
    }
  }
  out.Write(out.Channel(JsonChannel(absl::StrCat("/", id, "/scene"), "foxglove.SceneUpdate",
                                    SceneUpdateSchema())),
            time_ns, SceneJson(frame, *look_, time_ns));
  if (map_written_ != look_->map_fingerprint) {
    out.Write(out.Channel(JsonChannel(absl::StrCat("/", id, "/map"), "foxglove.SceneUpdate",
                                      SceneUpdateSchema())),
              time_ns, MapJson(*look_, time_ns));
    map_written_ = look_->map_fingerprint;
  }
  out.Write(out.Channel(JsonChannel(absl::StrCat("/", id, "/contacts"), "pitlane.Contacts",
                                    ContactsSchema())),
            time_ns, ContactsJson(frame, delivery.events, time_ns));
  // Once a race is called, and once more without standings when a reset ends it.
  if (frame.race != nullptr || race_written_) {
    out.Write(out.Channel(JsonChannel(absl::StrCat("/", id, "/race"), "pitlane.Race",
                                      RaceSchema())),
              time_ns, RaceJson(frame, delivery.events, time_ns));
    race_written_ = frame.race != nullptr;
  }
  const std::vector<std::string> lines = LogLines(
      id, delivery, log_ids_, [&] { return session_->Describe(false); }, time_ns, ids_);
  if (!lines.empty()) {
    const std::uint16_t log =
        out.Channel(JsonChannel(absl::StrCat("/", id, "/log"), "foxglove.Log", LogSchema()));
    for (const std::string& line : lines) out.Write(log, time_ns, line);
  }
  log_ids_ = ids_;
  // Telemetry of the lowest ids, as the live endpoint advertises them. The controls are not
  // those held at the frame's tick but now (the writer runs behind): left out.
  const std::size_t count = std::min(frame.vehicles.size(), kMaxVehicleChannels);
  for (std::size_t i = 0; i < count; ++i) {
    const sim::VehicleSnapshot& vehicle = frame.vehicles[i];
    const auto found = look_->vehicles.find(vehicle.id);
    out.Write(out.Channel(JsonChannel(absl::StrCat("/", id, "/vehicle/", vehicle.id),
                                      "pitlane.VehicleTelemetry", VehicleTelemetrySchema())),
              time_ns,
              TelemetryJson(frame, vehicle,
                            found != look_->vehicles.end() ? &found->second : nullptr, nullptr,
                            time_ns));
  }
}

}  // namespace pitlane::web
