// Fuzzes the scenario path: protobuf text → ParseScenario → SessionRequestFromProto → the
// session manager's checks and BuildWorld → a couple of ticks. What --scenario_dir files and
// the shipped scenarios (scenarios/*.textproto, the seeds) go through. A scenario may be
// rejected; nothing may crash, trip a sanitizer, or leave a NaN or an infinity in a vehicle's
// state.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_checks.h"
#include "google/protobuf/stubs/logging.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/api/convert.h"
#include "server/api/scenarios.h"
#include "server/session/session.h"
#include "server/session/session_manager.h"
#include "spdlog/spdlog.h"

namespace pitlane::fuzz {
namespace {

// High enough for every shipped scenario (highway: 1000), low enough for a quick input.
const session::ServerLimits kLimits = {
    .max_sessions = 4, .max_vehicles_per_session = 1000, .max_ticks_per_step = 4};

session::SessionManager& Manager() {
  static auto* const manager = new session::SessionManager(kLimits);
  return *manager;
}

void Run(absl::string_view text) {
  const absl::StatusOr<pitlane::v1::SessionConfig> config = api::ParseScenario("fuzz", text);
  if (!config.ok()) return;
  // A scenario naming a scenario is refused by CreateSession (no chains): nothing to follow.
  absl::StatusOr<session::SessionRequest> request = api::SessionRequestFromProto(*config);
  if (!request.ok()) return;
  // The shipped scenarios are REALTIME; this manager has no scheduler. Run the session in
  // LOCKSTEP, so that it steps here (Create still checks the rest of the clock).
  request->clock.mode = session::ClockMode::kLockstep;
  // The manager's checks, then BuildWorld (of the config it makes).
  absl::StatusOr<std::shared_ptr<session::Session>> session = Manager().Create(*request);
  if (!session.ok()) return;
  CheckSession(**session);
  (void)(*session)->Step(2, std::nullopt);
  CheckSession(**session);
  (void)Manager().Delete((*session)->id());
}

}  // namespace
}  // namespace pitlane::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // The manager logs every session it creates.
  // Protobuf logs every string field that is not UTF-8: noise, and slow.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pitlane::fuzz::Run(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
