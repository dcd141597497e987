// Scenarios: named SessionConfigs in protobuf text format, shipped in the binary (the files
// of scenarios/, embedded at build time) or read from a directory at run time.
#ifndef PITLANE_SERVER_API_SCENARIOS_H_
#define PITLANE_SERVER_API_SCENARIOS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pitlane/v1/simulator.pb.h"

namespace pitlane::api {

struct ShippedScenario {
  const char* name;
  const char* text;  // A pitlane.v1.SessionConfig in protobuf text format.
};

// The scenarios built into the server, by name.
const std::vector<ShippedScenario>& ShippedScenarios();

// Parses a SessionConfig in protobuf text format. `source` names the text in errors:
// InvalidArgument "<source>:<line>:<column>: <what is wrong>" for the first error.
absl::StatusOr<v1::SessionConfig> ParseScenario(absl::string_view source, absl::string_view text);

// The scenario `name`: <dir>/<name>.textproto if `dir` is set and the file exists, else the
// shipped one. Errors: InvalidArgument for a name that is not a plain file name (letters,
// digits, '-', '_'); NotFound ("scenario") for an unknown name; the parse errors above
// (after "scenario: "); a
// scenario that itself names a scenario is InvalidArgument (no chains).
absl::StatusOr<v1::SessionConfig> LoadScenario(absl::string_view name, const std::string& dir);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_SCENARIOS_H_
