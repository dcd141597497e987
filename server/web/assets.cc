#include "server/web/assets.h"

#include "absl/strings/match.h"

namespace pitlane::web {

absl::string_view PythonWheelPath() {
  for (const WebAsset& asset : WebAssets()) {
    if (absl::StartsWith(asset.path, "/python/") && absl::EndsWith(asset.path, ".whl")) {
      return asset.path;
    }
  }
  return "";
}

}  // namespace pitlane::web
