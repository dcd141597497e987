// A ByteSink onto a new file: created (never an existing one overwritten), written in order,
// synced and closed by Close. An error names the file and says why: RESOURCE_EXHAUSTED for a
// full disk or a quota, ALREADY_EXISTS, PERMISSION_DENIED, NOT_FOUND (no such directory), else
// INTERNAL; after one, every Write returns it (the file keeps what was written before).
#ifndef PITLANE_SERVER_RECORD_FILE_SINK_H_
#define PITLANE_SERVER_RECORD_FILE_SINK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/record/mcap_writer.h"

namespace pitlane::record {

class FileSink final : public ByteSink {
 public:
  static absl::StatusOr<std::unique_ptr<FileSink>> Create(const std::string& path);
  ~FileSink() override;  // Closes (without the sync) if Close was not called.

  absl::Status Write(absl::string_view bytes) override;
  // Syncs the file to its disk and closes it. Once; later calls return the first result.
  absl::Status Close();

 private:
  FileSink(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Failed(absl::string_view what, int error);

  const std::string path_;
  int fd_;
  absl::Status error_;
  bool closed_ = false;
};

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_FILE_SINK_H_
