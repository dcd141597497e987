// The browser viewer's files and the Python client's distributions, embedded in the binary at
// build time (embed_assets.cmake from server/web/viewer/, dashboards/foxglove-layout.json and
// the build's python/dist/): the server serves them itself, with no CDN and nothing fetched at
// run time.
#ifndef PITLANE_SERVER_WEB_ASSETS_H_
#define PITLANE_SERVER_WEB_ASSETS_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace pitlane::web {

struct WebAsset {
  absl::string_view path;  // "/viewer.js"
  absl::string_view content_type;
  absl::string_view body;
};

const std::vector<WebAsset>& WebAssets();

// The address of the Python client's wheel among WebAssets()
// ("/python/pitlane_client-0.1.0-py3-none-any.whl"), "" if it is not embedded.
absl::string_view PythonWheelPath();

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_ASSETS_H_
