#include "server/util/echo.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pitlane {

std::string Echo(absl::string_view text) {
  if (text.size() <= kEchoMaxBytes) return absl::CHexEscape(text);
  return absl::StrCat(absl::CHexEscape(text.substr(0, kEchoMaxBytes)), "...");
}

}  // namespace pitlane
