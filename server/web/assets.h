// The browser viewer's files, embedded in the binary at build time (embed_assets.cmake from
// server/web/viewer/ and dashboards/foxglove-layout.json): the server serves them itself,
// with no CDN and nothing fetched at run time.
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

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_ASSETS_H_
