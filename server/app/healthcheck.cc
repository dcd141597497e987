#include "server/app/healthcheck.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace pitlane::app {
namespace {

// Closes the socket when it goes out of scope.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or `deadline` passes.
absl::Status Wait(int fd, short events, absl::Time deadline, absl::string_view doing) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat("timed out ", doing));
    }
    pollfd polled{.fd = fd, .events = events, .revents = 0};
    const int ready = poll(&polled, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(doing, ": ", std::strerror(errno)));
    }
  }
}

}  // namespace

absl::Status CheckReady(absl::string_view http_listen, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::size_t colon = http_listen.rfind(':');
  std::uint32_t port = 0;
  if (http_listen.empty() || colon == absl::string_view::npos ||
      !absl::SimpleAtoi(http_listen.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_listen: the health check asks the HTTP endpoint's /readyz, so it needs the "
        "endpoint's fixed host:port, got \"",
        http_listen, "\""));
  }
  std::string host(http_listen.substr(0, colon));
  if (host == "0.0.0.0") host = "127.0.0.1";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen: host \"", host, "\" is not an IPv4 address"));
  }
  const std::string where = absl::StrCat("http://", host, ":", port, "/readyz");

  Socket socket_fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (socket_fd.fd() < 0) {
    return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  const int fd = socket_fd.fd();
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(errno)));
    }
    if (absl::Status ready = Wait(fd, POLLOUT, deadline, "connecting"); !ready.ok()) {
      return absl::UnavailableError(absl::StrCat(where, ": ", ready.message()));
    }
    int error = 0;
    socklen_t length = sizeof error;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(error)));
    }
  }
  // A loopback name for Host, whatever address was asked: a server without tokens answers
  // only those.
  const std::string request = absl::StrCat("GET /readyz HTTP/1.1\r\nHost: localhost:", port,
                                           "\r\nConnection: close\r\n\r\n");
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (absl::Status ready = Wait(fd, POLLOUT, deadline, "sending"); !ready.ok()) {
        return absl::UnavailableError(absl::StrCat(where, ": ", ready.message()));
      }
    } else {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(errno)));
    }
  }
  // The status line is all that is read: "HTTP/1.1 200 OK".
  std::string answer;
  char buffer[256];
  while (answer.find("\r\n") == std::string::npos && answer.size() < 1024) {
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      answer.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (absl::Status ready = Wait(fd, POLLIN, deadline, "waiting for the answer");
          !ready.ok()) {
        return absl::UnavailableError(absl::StrCat(where, ": ", ready.message()));
      }
    } else {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::strerror(errno)));
    }
  }
  const absl::string_view status_line = absl::string_view(answer).substr(0, answer.find("\r\n"));
  if (absl::StartsWith(status_line, "HTTP/1.1 200 ") ||
      absl::StartsWith(status_line, "HTTP/1.0 200 ")) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat(where, " answered \"", absl::CEscape(status_line.substr(0, 100)), "\""));
}

}  // namespace pitlane::app
