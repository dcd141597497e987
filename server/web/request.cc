#include "server/web/request.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/auth/tokens.h"
#include "server/util/json_text.h"
#include "server/web/visitor.h"

namespace pitlane::web {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; a malformed escape is kept.
std::string Decode(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

RequestQuery::RequestQuery(const char* query_string) {
  if (query_string == nullptr) return;
  for (const absl::string_view part : absl::StrSplit(query_string, '&', absl::SkipEmpty())) {
    if (parameters_.size() >= kMaxParameters) break;
    const std::size_t equals = part.find('=');
    parameters_.emplace_back(Decode(part.substr(0, equals)),
                             equals == absl::string_view::npos ? "" : Decode(part.substr(equals + 1)));
  }
}

std::optional<absl::string_view> RequestQuery::Get(absl::string_view name) const {
  for (const auto& [key, value] : parameters_) {
    if (key == name) return value;
  }
  return std::nullopt;
}

std::optional<std::string> TokenOf(mg_connection* connection, const RequestQuery& query,
                                   bool cookie_allowed) {
  if (const char* header = mg_get_header(connection, "Authorization"); header != nullptr) {
    const absl::StatusOr<absl::string_view> token = auth::BearerToken(header);
    return token.ok() ? std::string(*token) : std::string(header);
  }
  if (const std::optional<absl::string_view> token = query.Get("token")) {
    return std::string(*token);
  }
  if (const char* cookies = mg_get_header(connection, "Cookie");
      cookie_allowed && cookies != nullptr) {
    for (absl::string_view cookie : absl::StrSplit(cookies, ';')) {
      cookie = absl::StripAsciiWhitespace(cookie);
      if (absl::ConsumePrefix(&cookie, "pitlane_token=")) return std::string(cookie);
    }
  }
  return std::nullopt;
}

bool IsLoopbackHost(const char* host_header) {
  if (host_header == nullptr) return false;
  absl::string_view host = host_header;
  if (absl::ConsumePrefix(&host, "[")) {
    const std::size_t end = host.find(']');
    return end != absl::string_view::npos && host.substr(0, end) == "::1" &&
           (end + 1 == host.size() || host[end + 1] == ':');
  }
  host = host.substr(0, host.find(':'));
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr address{};
  return inet_pton(AF_INET, std::string(host).c_str(), &address) == 1 &&
         (ntohl(address.s_addr) >> 24) == 127;
}

bool ShutdownSocket(const mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr) return false;
  in_addr peer_address{};
  if (inet_pton(AF_INET, request->remote_addr, &peer_address) != 1) return false;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return false;
  bool found = false;
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    sockaddr_in peer{};
    sockaddr_in local{};
    socklen_t peer_size = sizeof(peer);
    socklen_t local_size = sizeof(local);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
        getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        peer.sin_family != AF_INET) {
      continue;
    }
    if (peer.sin_addr.s_addr == peer_address.s_addr &&
        ntohs(peer.sin_port) == request->remote_port &&
        ntohs(local.sin_port) == request->server_port) {
      shutdown(static_cast<int>(fd), SHUT_RDWR);
      found = true;
      break;
    }
  }
  closedir(fds);
  return found;
}

int Respond(mg_connection* connection, int status, absl::string_view reason,
            absl::string_view content_type, absl::string_view body,
            absl::string_view extra_headers) {
  const mg_request_info* request = mg_get_request_info(connection);
  const bool head = request != nullptr && request->request_method != nullptr &&
                    std::strcmp(request->request_method, "HEAD") == 0;
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(),
      "\r\nCache-Control: no-store\r\nConnection: close\r\n", extra_headers, "\r\n");
  mg_write(connection, header.data(), header.size());
  if (!head) mg_write(connection, body.data(), body.size());
  return status;
}

// {"error": message} with the status that goes with `error`'s code.
int RespondError(mg_connection* connection, const absl::Status& error) {
  int status = 500;
  absl::string_view reason = "Internal Server Error";
  switch (error.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      status = 400;
      reason = "Bad Request";
      break;
    case absl::StatusCode::kUnauthenticated:
      status = 401;
      reason = "Unauthorized";
      break;
    case absl::StatusCode::kPermissionDenied:
      status = 403;
      reason = "Forbidden";
      break;
    case absl::StatusCode::kNotFound:
      status = 404;
      reason = "Not Found";
      break;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      status = 409;
      reason = "Conflict";
      break;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      status = 503;
      reason = "Service Unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      status = 504;
      reason = "Gateway Timeout";
      break;
    default:
      break;
  }
  std::string body = "{\"error\":";
  json::AppendString(error.message(), &body);
  body.append("}\n");
  return Respond(connection, status, reason, "application/json", body,
                     status == 401 ? "WWW-Authenticate: Bearer realm=\"pitlane\"\r\n" : "");
}

absl::StatusOr<std::unique_ptr<Visitor>> VisitorOf(const Authenticator& authenticate,
                                                   mg_connection* connection) {
  if (!authenticate) return nullptr;
  const mg_request_info* request = mg_get_request_info(connection);
  return authenticate(
      TokenOf(connection, RequestQuery(request != nullptr ? request->query_string : nullptr)));
}

std::string PeerOf(const mg_request_info& request) {
  return absl::StrCat("ipv4:", request.remote_addr, ":", request.remote_port);
}

absl::Status CheckSameOrigin(mg_connection* connection) {
  const char* origin = mg_get_header(connection, "Origin");
  if (origin == nullptr) return absl::OkStatus();
  const char* host = mg_get_header(connection, "Host");
  if (host == nullptr || (absl::string_view(origin) != absl::StrCat("http://", host) &&
                          absl::string_view(origin) != absl::StrCat("https://", host))) {
    return absl::PermissionDeniedError("Origin: changes come from this server's own pages");
  }
  return absl::OkStatus();
}

}  // namespace pitlane::web
