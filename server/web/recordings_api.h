// The server's recordings over HTTP (docs/recording.md), for a browser or curl:
//
//   GET    /recordings                the recordings the visitor may read, as JSON, newest first
//   GET    /recordings/<id>.mcap      the file (Range requests resume a download: 206, 416)
//   DELETE /recordings/<id>           deletes a stopped recording's file (owner or admin)
//
// The token comes as for the viewer's API (request.h); the rules are those of the gRPC calls
// ListRecordings, DownloadRecording and DeleteRecording. A recording the visitor may not read
// is answered as one that does not exist (404). Errors are {"error": "..."} naming the field.
#ifndef PITLANE_SERVER_WEB_RECORDINGS_API_H_
#define PITLANE_SERVER_WEB_RECORDINGS_API_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/record/recordings.h"
#include "server/web/foxglove_hub.h"

struct mg_connection;

namespace pitlane::web {

struct RecordingsApiOptions {
  // Must outlive the API. Null: recording is off (every request is answered 404 saying so).
  record::Recordings* recordings = nullptr;
  // Null: every visitor may do everything (--auth=none).
  Authenticator authenticate;
  // As ViewerApiOptions::audit ("recording.delete").
  std::function<void(absl::string_view peer, absl::string_view action,
                     const std::vector<std::pair<std::string, std::string>>& fields)>
      audit;
};

// A Range header's single byte range within a file of `size` bytes (RFC 9110 14.1.2):
// "bytes=a-b", "bytes=a-" or "bytes=-n". Returns the first and last byte (inclusive);
// nullopt for a header this server ignores (not bytes, several ranges, malformed: the whole
// file is sent); {size, size} for a range that cannot be satisfied (416).
struct ByteRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  bool satisfiable = true;
};
std::optional<ByteRange> ParseRange(absl::string_view header, std::uint64_t size);

class RecordingsApi {
 public:
  // Files sent at once over HTTP (503 beyond); the gRPC downloads have their own count.
  static constexpr int kMaxDownloads = 8;

  explicit RecordingsApi(RecordingsApiOptions options) : options_(std::move(options)) {}
  // civetweb's request handler for /recordings (the API is its user data).
  static int Handle(mg_connection* connection, void* api);

 private:
  int Serve(mg_connection* connection);
  int SendFile(mg_connection* connection, const record::RecordingInfo& info);
  const RecordingsApiOptions options_;
  std::atomic<int> downloads_{0};
};

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_RECORDINGS_API_H_
