#include "server/app/options.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "openssl/bio.h"
#include "openssl/err.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "server/api/access.h"
#include "server/auth/tokens.h"
#include "server/session/random_id.h"
#include "server/util/echo.h"
#include "server/util/status_macros.h"

namespace pitlane::app {
namespace {

// The names --log_level accepts, in order of severity.
constexpr std::array<std::pair<absl::string_view, spdlog::level::level_enum>, 7> kLogLevels = {{
    {"trace", spdlog::level::trace},
    {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},
    {"warn", spdlog::level::warn},
    {"error", spdlog::level::err},
    {"critical", spdlog::level::critical},
    {"off", spdlog::level::off},
}};

absl::StatusOr<spdlog::level::level_enum> LogLevelFromFlag(absl::string_view name) {
  for (const auto& [level_name, level] : kLogLevels) {
    if (name == level_name) return level;
  }
  std::string names;
  for (const auto& [level_name, level] : kLogLevels) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", level_name);
  }
  return absl::InvalidArgumentError(absl::StrCat("--log_level: must be one of ", names, ", got \"",
                                                 absl::CHexEscape(name), "\""));
}

absl::StatusOr<LogFormat> LogFormatFromFlag(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log_format: must be text or json, got \"", absl::CHexEscape(name), "\""));
}

// The message has CheckInRange's form, with the bounds printed as integers (1000000, not
// 1e+06).
absl::Status CheckFlagRange(absl::string_view flag, std::int64_t value, std::int64_t lo,
                            std::int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": must be in [", lo, ", ", hi, "], got ", value));
}

absl::Status CheckIdleTimeout(double timeout_s) {
  if (timeout_s == 0.0) return absl::OkStatus();
  if (timeout_s >= kSessionIdleTimeoutMin_s && timeout_s <= kSessionIdleTimeoutMax_s) {
    return absl::OkStatus();  // NaN fails both comparisons and lands below.
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--session_idle_timeout: must be 0 (never) or in [", kSessionIdleTimeoutMin_s,
                   ", ", kSessionIdleTimeoutMax_s, "] seconds, got ", timeout_s));
}

// Both in the widest range a session allows, and min <= max.
absl::Status CheckBarrierTimeouts(double min_s, double max_s) {
  for (const auto& [flag, value] : {std::pair<absl::string_view, double>{"min", min_s},
                                    std::pair<absl::string_view, double>{"max", max_s}}) {
    // NaN fails both comparisons.
    if (!(value >= session::kMinBarrierTimeout_s && value <= session::kMaxBarrierTimeout_s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "_barrier_timeout_s: must be in [", session::kMinBarrierTimeout_s, ", ",
          session::kMaxBarrierTimeout_s, "] seconds, got ", value));
    }
  }
  if (min_s > max_s) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_barrier_timeout_s: must be at most --max_barrier_timeout_s (", max_s,
                     "), got ", min_s));
  }
  return absl::OkStatus();
}

// The contents of a small file a flag names (a token, a PEM certificate or key).
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path) {
  constexpr std::size_t kMaxBytes = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read \"",
                                                   absl::CHexEscape(path), "\""));
  }
  std::string contents(kMaxBytes + 1, '\0');
  in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
  contents.resize(static_cast<std::size_t>(in.gcount()));
  if (contents.size() > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": \"", absl::CHexEscape(path), "\" is larger than 1 MiB"));
  }
  return contents;
}

// The admin token from --admin_token_file or the environment, checked (never echoed).
absl::StatusOr<std::string> AdminToken(const FlagValues& flags) {
  std::string token;
  absl::string_view source;
  if (!flags.admin_token_file.empty()) {
    ASSIGN_OR_RETURN(token, ReadFlagFile("admin_token_file", flags.admin_token_file));
    source = "--admin_token_file";
  } else {
    token = flags.admin_token_env;
    source = kAdminTokenEnv;
  }
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty() && flags.admin_token_file.empty()) return token;
  if (!auth::LooksLikeToken(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the admin token must be \"", auth::kTokenPrefix, "\" and ",
        auth::kTokenRandomChars,
        " characters of a-z and 2-7 (make one with pitlane-server --new_token)"));
  }
  return token;
}

// OpenSSL's reading of PEM text, so that a bad file is found at start and named (gRPC would
// only fail to listen, without saying which file is wrong).
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
std::unique_ptr<BIO, BioDeleter> ReadOnlyBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}
// Refuses encrypted keys instead of asking for a passphrase on the terminal.
int NoPassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return 0; }

// The first certificate in `pem`, or InvalidArgument naming `flag`.
absl::StatusOr<X509Ptr> FirstCertificate(absl::string_view flag, const std::string& pem) {
  X509Ptr certificate(
      PEM_read_bio_X509(ReadOnlyBio(pem).get(), nullptr, &NoPassphrase, nullptr));
  ERR_clear_error();
  if (certificate == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": no PEM certificate could be read from it"));
  }
  return certificate;
}

// That the certificate chain and private key files are PEM, and that the key belongs to the
// chain's first certificate.
absl::Status CheckKeyPair(const std::string& cert_pem, const std::string& key_pem) {
  ASSIGN_OR_RETURN(const X509Ptr certificate, FirstCertificate("tls_cert_file", cert_pem));
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(ReadOnlyBio(key_pem).get(), nullptr, &NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        "--tls_key_file: no PEM private key could be read from it (an encrypted key is not "
        "supported: decrypt it with openssl pkey)");
  }
  const bool matches = X509_check_private_key(certificate.get(), key.get()) == 1;
  ERR_clear_error();
  if (!matches) {
    return absl::InvalidArgumentError(
        "--tls_key_file: this private key does not belong to the first certificate of "
        "--tls_cert_file");
  }
  return absl::OkStatus();
}

// TLS credentials from the PEM files, or null for plaintext.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(const FlagValues& flags) {
  if (flags.tls_cert_file.empty() != flags.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file: give both (a certificate and its private key) or "
        "neither");
  }
  if (flags.tls_cert_file.empty()) {
    if (!flags.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file: needs --tls_cert_file and --tls_key_file (mutual TLS is TLS)");
    }
    return nullptr;
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadFlagFile("tls_cert_file", flags.tls_cert_file));
  ASSIGN_OR_RETURN(pair.private_key, ReadFlagFile("tls_key_file", flags.tls_key_file));
  RETURN_IF_ERROR(CheckKeyPair(pair.cert_chain, pair.private_key));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!flags.tls_client_ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadFlagFile("tls_client_ca_file", flags.tls_client_ca_file));
    RETURN_IF_ERROR(FirstCertificate("tls_client_ca_file", ssl.pem_root_certs).status());
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// --auth and its admin token, into `options`.
absl::Status ResolveAuth(const FlagValues& flags, StartupOptions& options) {
  ASSIGN_OR_RETURN(std::string admin_token, AdminToken(flags));
  // The HTTP endpoint shows every session (its viewer and Foxglove's protocol) and can change
  // them: reachable from other machines, it needs tokens as the gRPC port does.
  const bool grpc_loopback = api::IsLoopbackAddress(flags.listen);
  const bool http_loopback = flags.http_listen.empty() || api::IsLoopbackAddress(flags.http_listen);
  const bool loopback = grpc_loopback && http_loopback;
  api::AuthMode mode;
  if (flags.auth == "token") {
    mode = api::AuthMode::kToken;
  } else if (flags.auth == "none") {
    mode = api::AuthMode::kNone;
  } else if (flags.auth == "auto") {
    mode = loopback && admin_token.empty() ? api::AuthMode::kNone : api::AuthMode::kToken;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth: must be auto, token or none, got \"", absl::CHexEscape(flags.auth), "\""));
  }
  if (mode == api::AuthMode::kNone) {
    if (!admin_token.empty()) {
      return absl::InvalidArgumentError(
          "--auth=none: an admin token was given (--admin_token_file or PITLANE_ADMIN_TOKEN) but "
          "tokens are not checked; use --auth=token");
    }
    if (!loopback && !flags.allow_unauthenticated_remote_access) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth=none: ",
          grpc_loopback ? absl::StrCat("--http_listen=", flags.http_listen)
                        : absl::StrCat("--listen=", flags.listen),
          " is reachable from other machines, and without tokens anyone there may control or "
          "delete every session; use --auth=token (the default), or add "
          "--allow_unauthenticated_remote_access if that is what you want"));
    }
  }
  options.server.access.mode = mode;
  if (mode == api::AuthMode::kToken) {
    if (admin_token.empty()) {
      ASSIGN_OR_RETURN(admin_token, auth::NewToken());
      options.admin_token_generated = true;
    }
    options.server.admin_token = std::move(admin_token);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckListenAddress(absl::string_view address, absl::string_view flag) {
  const auto invalid = [address, flag](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": must be host:port with a port in [0, 65535] (e.g. "
                     "127.0.0.1:50051 or [::1]:50051); ",
                     why, ", got \"", absl::CHexEscape(address), "\""));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return invalid("no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return invalid("no host");
  // An unbracketed IPv6 host would make the port ambiguous ("::1:50051").
  const bool bracketed = host.front() == '[' && host.back() == ']' && host.size() > 2;
  if (!bracketed && host.find_first_of(":[]") != absl::string_view::npos) {
    return invalid("an IPv6 host must be in brackets");
  }
  int port_number = -1;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return invalid("the port is not a number in [0, 65535]");
  }
  return absl::OkStatus();
}

absl::Status CheckHttpListenAddress(absl::string_view address, absl::string_view flag) {
  RETURN_IF_ERROR(CheckListenAddress(address, flag));
  // civetweb reads its own syntax into this value (lists, "+" for all interfaces, "s" for
  // TLS) and, as Debian builds it, no IPv6: an IPv4 address is all that means what it says.
  const absl::string_view host = address.substr(0, address.rfind(':'));
  const std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  const bool ipv4 =
      parts.size() == 4 && std::all_of(parts.begin(), parts.end(), [](absl::string_view part) {
        int value = -1;
        return !part.empty() && part.size() <= 3 &&
               std::all_of(part.begin(), part.end(), absl::ascii_isdigit) &&
               absl::SimpleAtoi(part, &value) && value <= 255;
      });
  if (!ipv4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": must be an IPv4 address and a port (e.g. 127.0.0.1:8080 or 0.0.0.0:8080), "
        "got \"", absl::CHexEscape(address), "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<StartupOptions> OptionsFromFlags(const FlagValues& flags, unsigned cpu_cores) {
  RETURN_IF_ERROR(CheckListenAddress(flags.listen));
  if (!flags.http_listen.empty()) {
    RETURN_IF_ERROR(CheckHttpListenAddress(flags.http_listen, "http_listen"));
  }
  if (!flags.metrics_listen.empty()) {
    RETURN_IF_ERROR(CheckHttpListenAddress(flags.metrics_listen, "metrics_listen"));
  }
  RETURN_IF_ERROR(
      CheckFlagRange("max_sessions", flags.max_sessions, kMaxSessionsMin, kMaxSessionsMax));
  RETURN_IF_ERROR(CheckFlagRange("max_vehicles_per_session", flags.max_vehicles_per_session,
                                 kMaxVehiclesPerSessionMin, kMaxVehiclesPerSessionMax));
  RETURN_IF_ERROR(CheckFlagRange("max_ticks_per_step", flags.max_ticks_per_step,
                                 kMaxTicksPerStepMin, kMaxTicksPerStepMax));
  RETURN_IF_ERROR(CheckFlagRange("max_contacts_per_tick", flags.max_contacts_per_tick,
                                 kMaxContactsPerTickMin, kMaxContactsPerTickMax));
  RETURN_IF_ERROR(CheckFlagRange("max_receive_message_mib", flags.max_receive_message_mib,
                                 kMaxReceiveMessageMibMin, kMaxReceiveMessageMibMax));
  RETURN_IF_ERROR(CheckFlagRange("max_send_message_mib", flags.max_send_message_mib,
                                 kMaxReceiveMessageMibMin, kMaxReceiveMessageMibMax));
  RETURN_IF_ERROR(
      CheckFlagRange("worker_threads", flags.worker_threads, kWorkerThreadsMin, kWorkerThreadsMax));
  RETURN_IF_ERROR(CheckIdleTimeout(flags.session_idle_timeout_s));
  RETURN_IF_ERROR(CheckBarrierTimeouts(flags.min_barrier_timeout_s, flags.max_barrier_timeout_s));
  RETURN_IF_ERROR(CheckFlagRange("max_sessions_per_client", flags.max_sessions_per_client,
                                 kMaxSessionsPerClientMin, kMaxSessionsPerClientMax));
  RETURN_IF_ERROR(CheckFlagRange("max_tokens_per_session", flags.max_tokens_per_session,
                                 kMaxTokensPerSessionMin, kMaxTokensPerSessionMax));
  if (!flags.replica.empty() && !session::IsReplicaName(flags.replica)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replica: must be 1 to ", session::kMaxReplicaNameChars,
        " characters of a-z, 0-9 and '-', beginning and ending with a letter or digit, got \"",
        Echo(flags.replica), "\""));
  }

  RETURN_IF_ERROR(CheckFlagRange("record_quota_mib", flags.record_quota_mib, kRecordQuotaMibMin,
                                 kRecordQuotaMibMax));
  RETURN_IF_ERROR(CheckFlagRange("max_recording_mib", flags.max_recording_mib,
                                 kMaxRecordingMibMin, kMaxRecordingMibMax));
  RETURN_IF_ERROR(CheckFlagRange("max_recordings", flags.max_recordings, kMaxRecordingsMin,
                                 kMaxRecordingsMax));
  if (!(flags.max_recording_s >= kMaxRecordingMin_s && flags.max_recording_s <= kMaxRecordingMax_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_recording_s: must be in [", kMaxRecordingMin_s, ", ",
                     kMaxRecordingMax_s, "] seconds, got ", flags.max_recording_s));
  }

  StartupOptions options;
  ASSIGN_OR_RETURN(options.log_level, LogLevelFromFlag(flags.log_level));
  ASSIGN_OR_RETURN(options.log_format, LogFormatFromFlag(flags.log_format));

  ServerOptions& server = options.server;
  server.listen_address = flags.listen;
  server.http_listen_address = flags.http_listen;
  server.metrics_listen_address = flags.metrics_listen;
  server.limits = {
      .max_sessions = static_cast<std::uint32_t>(flags.max_sessions),
      .max_vehicles_per_session = static_cast<std::uint32_t>(flags.max_vehicles_per_session),
      .max_ticks_per_step = static_cast<std::uint32_t>(flags.max_ticks_per_step),
      .max_contacts_per_tick = static_cast<std::uint32_t>(flags.max_contacts_per_tick),
      .session_idle_timeout_s = flags.session_idle_timeout_s,
      .clock_limits = {.min_barrier_timeout_s = flags.min_barrier_timeout_s,
                       .max_barrier_timeout_s = flags.max_barrier_timeout_s},
      .replica = flags.replica,
  };
  // At most 1024 MiB, so the shift stays below 2^31.
  server.max_receive_message_bytes = static_cast<int>(flags.max_receive_message_mib) << 20;
  server.max_send_message_bytes = static_cast<int>(flags.max_send_message_mib) << 20;
  const std::int64_t workers =
      flags.worker_threads > 0 ? flags.worker_threads : static_cast<std::int64_t>(cpu_cores);
  server.worker_threads = static_cast<int>(std::clamp<std::int64_t>(workers, 1, kWorkerThreadsMax));
  server.scenario_dir = flags.scenario_dir;
  server.startup_scenario = flags.scenario;
  server.access.max_sessions_per_client = static_cast<std::uint32_t>(flags.max_sessions_per_client);
  server.access.max_tokens_per_session = static_cast<std::uint32_t>(flags.max_tokens_per_session);
  if (!flags.record_dir.empty()) {
    // The directory itself is checked when the server starts (record::Recordings::Create).
    server.recording = record::RecordingLimits{
        .dir = flags.record_dir,
        .quota_bytes = static_cast<std::uint64_t>(flags.record_quota_mib) << 20,
        .max_bytes = static_cast<std::uint64_t>(flags.max_recording_mib) << 20,
        .max_duration_s = flags.max_recording_s,
        .max_active = static_cast<std::uint32_t>(flags.max_recordings)};
  }
  RETURN_IF_ERROR(ResolveAuth(flags, options));
  ASSIGN_OR_RETURN(server.credentials, TlsCredentials(flags));
  options.tls = server.credentials != nullptr;
  if (server.access.mode == api::AuthMode::kToken && !flags.http_listen.empty() &&
      !api::IsLoopbackAddress(flags.http_listen)) {
    // The endpoint speaks plain HTTP: a scraper's admin token would cross the network in clear.
    options.warnings.push_back(absl::StrCat(
        "--http_listen=", flags.http_listen,
        " is plain HTTP on the network: scrape /metrics from this machine, through a TLS proxy, "
        "or on --metrics_listen on a private network, so that the admin token does not cross "
        "the network in clear"));
  }
  return options;
}

}  // namespace pitlane::app
