#include "server/web/recordings_api.h"

#include <civetweb.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/util/json_text.h"
#include "server/web/request.h"

namespace pitlane::web {
namespace {

absl::Status NoSuchRecording() {
  return absl::NotFoundError("recording_id: no such recording on this server");
}

absl::string_view StateName(const record::RecordingProgress& progress) {
  if (!progress.ended) return "recording";
  return progress.end_status.ok() ? "complete" : "failed";
}

// The fields of ListRecordings' RecordingInfo, by the same names.
void AppendRecording(const record::RecordingInfo& info, std::string* out) {
  const record::RecordingProgress& progress = info.progress;
  out->append("{\"recording_id\":");
  json::AppendString(info.recording_id, out);
  out->append(",\"session_id\":");
  json::AppendString(info.session_id, out);
  out->append(",\"state\":\"");
  absl::StrAppend(out, StateName(progress));
  out->append("\",\"end_reason\":");
  json::AppendString(progress.end_reason.empty() && !progress.end_status.ok()
                         ? std::string(progress.end_status.message())
                         : progress.end_reason,
                     out);
  out->append(",\"bytes\":");
  json::AppendInteger(progress.bytes, out);
  out->append(",\"messages\":");
  json::AppendInteger(progress.messages, out);
  out->append(",\"ticks\":");
  json::AppendInteger(progress.ticks, out);
  out->append(",\"duration_s\":");
  json::AppendNumber(info.tick_rate_hz > 0.0
                         ? static_cast<double>(progress.ticks) / info.tick_rate_hz
                         : 0.0,
                     out);
  out->append(",\"start_tick\":");
  json::AppendInteger(info.start_time.tick, out);
  out->append(",\"replayable_from_start\":");
  out->append(info.replayable_from_start ? "true" : "false");
  out->append(",\"frames_lost\":");
  json::AppendInteger(progress.frames_lost, out);
  out->append(",\"commands_lost\":");
  json::AppendInteger(progress.commands_lost, out);
  out->append(",\"options\":{\"telemetry_rate_hz\":");
  json::AppendNumber(info.telemetry_rate_hz, out);
  out->append(",\"foxglove_rate_hz\":");
  json::AppendNumber(info.foxglove_rate_hz, out);
  out->append(",\"max_bytes\":");
  json::AppendInteger(info.max_bytes, out);
  out->append(",\"max_duration_s\":");
  json::AppendNumber(info.max_duration_s, out);
  out->push_back('}');
  out->append(",\"url\":");
  json::AppendString(absl::StrCat("/recordings/", info.recording_id, ".mcap"), out);
  out->push_back('}');
}

bool ParseOffset(absl::string_view text, std::uint64_t* value) {
  // Digits only: SimpleAtoi would take a sign or spaces.
  if (text.empty() || text.size() > 19) return false;
  for (const char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(text, value);
}

}  // namespace

std::optional<ByteRange> ParseRange(absl::string_view header, std::uint64_t size) {
  header = absl::StripAsciiWhitespace(header);
  if (!absl::ConsumePrefix(&header, "bytes=")) return std::nullopt;
  const std::size_t dash = header.find('-');
  if (dash == absl::string_view::npos || header.find(',') != absl::string_view::npos) {
    return std::nullopt;
  }
  const absl::string_view first_text = header.substr(0, dash);
  const absl::string_view last_text = header.substr(dash + 1);
  const ByteRange unsatisfiable{.first = size, .last = size, .satisfiable = false};
  if (first_text.empty()) {  // The last n bytes.
    std::uint64_t suffix = 0;
    if (!ParseOffset(last_text, &suffix)) return std::nullopt;
    if (suffix == 0 || size == 0) return unsatisfiable;
    return ByteRange{.first = suffix >= size ? 0 : size - suffix, .last = size - 1};
  }
  std::uint64_t first = 0;
  if (!ParseOffset(first_text, &first)) return std::nullopt;
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!last_text.empty()) {
    std::uint64_t asked = 0;
    if (!ParseOffset(last_text, &asked) || asked < first) return std::nullopt;
    if (asked < last) last = asked;
  }
  if (first >= size) return unsatisfiable;
  return ByteRange{.first = first, .last = last};
}

int RecordingsApi::Handle(mg_connection* connection, void* api) {
  return static_cast<RecordingsApi*>(api)->Serve(connection);
}

int RecordingsApi::Serve(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr || request->local_uri == nullptr) return 0;
  absl::StatusOr<std::unique_ptr<Visitor>> authenticated =
      VisitorOf(options_.authenticate, connection);
  if (!authenticated.ok()) return RespondError(connection, authenticated.status());
  const std::unique_ptr<Visitor> visitor = *std::move(authenticated);
  if (options_.recordings == nullptr) {
    return RespondError(connection, absl::NotFoundError(
                                        "recording is off on this server: start it with "
                                        "--record_dir=<directory>"));
  }
  const absl::string_view method = request->request_method;
  absl::string_view path = request->local_uri;
  if (!absl::ConsumePrefix(&path, "/recordings")) return RespondError(connection, NoSuchRecording());
  if (path.empty() || path == "/") {
    if (method != "GET" && method != "HEAD") {
      return Respond(connection, 405, "Method Not Allowed", "application/json",
                     "{\"error\":\"method: GET /recordings\"}\n", "Allow: GET, HEAD\r\n");
    }
    std::string body = "{\"recordings\":[";
    bool first = true;
    for (const record::RecordingInfo& info : options_.recordings->List()) {
      if (visitor != nullptr && !visitor->MayUseRecording(info.owner, info.session_id,
                                                         /*change=*/false).ok()) {
        continue;
      }
      if (!first) body.push_back(',');
      first = false;
      AppendRecording(info, &body);
    }
    body.append("]}\n");
    return Respond(connection, 200, "OK", "application/json", body);
  }
  if (!absl::ConsumePrefix(&path, "/") || path.find('/') != absl::string_view::npos) {
    return RespondError(connection, absl::NotFoundError(
                                        "path: /recordings/<id>.mcap or /recordings/<id>"));
  }
  const bool file = absl::ConsumeSuffix(&path, ".mcap");
  const absl::string_view id = path;
  if (id.empty()) return RespondError(connection, absl::InvalidArgumentError("recording_id: required"));
  const bool change = method == "DELETE";
  if (file ? (method != "GET" && method != "HEAD") : !change) {
    return Respond(connection, 405, "Method Not Allowed", "application/json",
                   file ? "{\"error\":\"method: GET /recordings/<id>.mcap downloads\"}\n"
                        : "{\"error\":\"method: DELETE /recordings/<id> deletes\"}\n",
                   file ? "Allow: GET, HEAD\r\n" : "Allow: DELETE\r\n");
  }
  if (change) {
    if (const absl::Status same = CheckSameOrigin(connection); !same.ok()) {
      return RespondError(connection, same);
    }
  }
  absl::StatusOr<record::RecordingInfo> info = options_.recordings->Get(id);
  if (!info.ok()) return RespondError(connection, NoSuchRecording());
  if (visitor != nullptr) {
    if (const absl::Status allowed = visitor->MayUseRecording(info->owner, info->session_id, change);
        !allowed.ok()) {
      return RespondError(connection, allowed);
    }
  }
  if (file) return SendFile(connection, *info);
  absl::StatusOr<std::uint64_t> freed = options_.recordings->Delete(id);
  if (!freed.ok()) return RespondError(connection, freed.status());
  if (options_.audit) {
    options_.audit(PeerOf(*request), "recording.delete",
                   {{"by", visitor != nullptr ? visitor->Who() : "anyone"},
                    {"recording", info->recording_id},
                    {"bytes", absl::StrCat(*freed)}});
  }
  std::string body = "{\"recording_id\":";
  json::AppendString(info->recording_id, &body);
  absl::StrAppend(&body, ",\"bytes_freed\":", *freed, "}\n");
  return Respond(connection, 200, "OK", "application/json", body);
}

int RecordingsApi::SendFile(mg_connection* connection, const record::RecordingInfo& info) {
  if (downloads_.fetch_add(1) >= kMaxDownloads) {
    downloads_.fetch_sub(1);
    return RespondError(connection, absl::UnavailableError(absl::StrCat(
                                        "this server sends at most ", kMaxDownloads,
                                        " recordings at once over HTTP: retry shortly")));
  }
  struct Release {
    std::atomic<int>& count;
    int fd = -1;
    ~Release() {
      if (fd >= 0) close(fd);
      count.fetch_sub(1);
    }
  } release{downloads_};
  // Opened once: a recording deleted while it is sent is still sent whole, and one still
  // being written is sent as far as it was when asked for.
  // Not a link, not a FIFO put in its place (the open would block on it): a regular file.
  release.fd = open(info.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat status {};
  if (release.fd < 0 || fstat(release.fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    return RespondError(connection,
                        absl::NotFoundError("recording_id: the recording's file is gone from "
                                            "--record_dir"));
  }
  const std::uint64_t size = static_cast<std::uint64_t>(status.st_size);
  std::uint64_t first = 0;
  std::uint64_t last = size == 0 ? 0 : size - 1;
  bool partial = false;
  if (const char* range_header = mg_get_header(connection, "Range"); range_header != nullptr) {
    if (const std::optional<ByteRange> range = ParseRange(range_header, size)) {
      if (!range->satisfiable) {
        return Respond(connection, 416, "Range Not Satisfiable", "application/json",
                       absl::StrCat("{\"error\":\"Range: the file has ", size, " bytes\"}\n"),
                       absl::StrCat("Content-Range: bytes */", size, "\r\n"));
      }
      first = range->first;
      last = range->last;
      partial = true;
    }
  }
  const std::uint64_t length = size == 0 ? 0 : last - first + 1;
  std::string header = absl::StrCat(
      "HTTP/1.1 ", partial ? "206 Partial Content" : "200 OK",
      "\r\nContent-Type: application/octet-stream\r\nContent-Length: ", length,
      "\r\nContent-Disposition: attachment; filename=\"", info.recording_id,
      ".mcap\"\r\nAccept-Ranges: bytes\r\nCache-Control: no-store\r\nConnection: close\r\n");
  if (partial) absl::StrAppend(&header, "Content-Range: bytes ", first, "-", last, "/", size, "\r\n");
  header.append("\r\n");
  if (mg_write(connection, header.data(), header.size()) <= 0) return 200;
  const mg_request_info* request = mg_get_request_info(connection);
  if (std::strcmp(request->request_method, "HEAD") == 0) return partial ? 206 : 200;
  // A client that stops reading is dropped by civetweb's request timeout.
  constexpr std::size_t kPiece = 256 << 10;
  auto buffer = std::make_unique<char[]>(kPiece);
  std::uint64_t offset = first;
  std::uint64_t left = length;
  while (left > 0) {
    const std::size_t want = left < kPiece ? static_cast<std::size_t>(left) : kPiece;
    const ssize_t got = pread(release.fd, buffer.get(), want, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // The file shrank: the client sees a short body.
    if (mg_write(connection, buffer.get(), static_cast<std::size_t>(got)) <= 0) break;
    offset += static_cast<std::uint64_t>(got);
    left -= static_cast<std::uint64_t>(got);
  }
  return partial ? 206 : 200;
}

}  // namespace pitlane::web
