#include "server/api/scenarios.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "server/util/echo.h"

namespace pitlane::api {
namespace {

// Keeps the first parse error with its position (the parser's lines and columns are 0-based).
class FirstError final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

bool IsPlainName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<v1::SessionConfig> ParseScenario(absl::string_view source, absl::string_view text) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  v1::SessionConfig config;
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", errors.error()));
  }
  return config;
}

absl::StatusOr<v1::SessionConfig> LoadScenario(absl::string_view name, const std::string& dir) {
  if (!IsPlainName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scenario: a name of letters, digits, '-' and '_' (at most 64), got \"", Echo(name), "\""));
  }
  absl::StatusOr<v1::SessionConfig> config;
  bool found = false;
  if (!dir.empty()) {
    const std::string path = absl::StrCat(dir, "/", name, ".textproto");
    std::ifstream file(path);
    if (file) {
      std::stringstream text;
      text << file.rdbuf();
      config = ParseScenario(path, text.str());
      found = true;
    }
  }
  if (!found) {
    for (const ShippedScenario& shipped : ShippedScenarios()) {
      if (name == shipped.name) {
        config = ParseScenario(absl::StrCat(shipped.name, ".textproto"), shipped.text);
        found = true;
        break;
      }
    }
  }
  if (!found) {
    std::vector<std::string> names;
    for (const ShippedScenario& shipped : ShippedScenarios()) names.emplace_back(shipped.name);
    return absl::NotFoundError(absl::StrCat("scenario: no scenario \"", Echo(name),
                                            "\" (shipped: ", absl::StrJoin(names, ", "), ")"));
  }
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scenario: ", config.status().message()));
  }
  if (!config->scenario().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scenario: scenario \"", Echo(name), "\" names another scenario (\"",
                     Echo(config->scenario()), "\"); scenarios do not chain"));
  }
  return config;
}

}  // namespace pitlane::api
