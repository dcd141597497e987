#include "server/record/file_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pitlane::record {
namespace {

absl::StatusCode CodeOf(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::StatusCode::kResourceExhausted;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case ENOENT:
    case ENOTDIR:
      return absl::StatusCode::kNotFound;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ErrnoStatus(absl::string_view what, const std::string& path, int error) {
  return absl::Status(CodeOf(error),
                      absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileSink>> FileSink::Create(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("cannot create", path, errno);
  return std::unique_ptr<FileSink>(new FileSink(path, fd));
}

FileSink::~FileSink() {
  if (!closed_) ::close(fd_);
}

absl::Status FileSink::Failed(absl::string_view what, int error) {
  error_ = ErrnoStatus(what, path_, error);
  return error_;
}

absl::Status FileSink::Write(absl::string_view bytes) {
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Failed("cannot write", errno);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FileSink::Close() {
  if (closed_) return error_;
  closed_ = true;
  if (error_.ok() && ::fsync(fd_) != 0) (void)Failed("cannot sync", errno);
  if (::close(fd_) != 0 && error_.ok() && errno != EINTR) (void)Failed("cannot close", errno);
  return error_;
}

}  // namespace pitlane::record
