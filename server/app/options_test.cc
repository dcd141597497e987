#include "server/app/options.h"

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/tokens.h"
#include "server/util/status_matchers.h"

namespace pitlane::app {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One flag set to one value: accepted, or refused with a message naming the flag and its
// allowed values.
struct FlagCase {
  std::string name;
  std::function<void(FlagValues&)> set;
  bool accepted;
  std::string message;  // The flag and its range, when refused.
};

class OptionsFromFlagsTest : public ::testing::TestWithParam<FlagCase> {};

TEST_P(OptionsFromFlagsTest, AcceptsOrNamesTheFlagAndItsRange) {
  FlagValues flags;
  GetParam().set(flags);
  absl::StatusOr<StartupOptions> options = OptionsFromFlags(flags, 4);
  if (GetParam().accepted) {
    EXPECT_TRUE(options.ok()) << options.status();
  } else {
    EXPECT_THAT(options,
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
  }
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Flags, OptionsFromFlagsTest,
    ::testing::ValuesIn(std::vector<FlagCase>{
        {"Defaults", [](FlagValues&) {}, true, ""},
        {"MaxSessionsZero", [](FlagValues& f) { f.max_sessions = 0; }, false,
         "--max_sessions: must be in [1, 100000], got 0"},
        {"MaxSessionsNegative", [](FlagValues& f) { f.max_sessions = -1; }, false,
         "--max_sessions: must be in [1, 100000], got -1"},
        {"MaxSessionsHighest", [](FlagValues& f) { f.max_sessions = 100000; }, true, ""},
        {"MaxSessionsTooMany", [](FlagValues& f) { f.max_sessions = 100001; }, false,
         "--max_sessions: must be in [1, 100000]"},
        {"MaxSessionsHuge",
         [](FlagValues& f) { f.max_sessions = std::numeric_limits<std::int64_t>::max(); }, false,
         "--max_sessions: must be in [1, 100000]"},
        {"VehiclesZero", [](FlagValues& f) { f.max_vehicles_per_session = 0; }, false,
         "--max_vehicles_per_session: must be in [1, 1000000], got 0"},
        {"VehiclesHighest", [](FlagValues& f) { f.max_vehicles_per_session = 1000000; }, true, ""},
        {"ContactsZero", [](FlagValues& f) { f.max_contacts_per_tick = 0; }, false,
         "--max_contacts_per_tick: must be in [1, 10000000], got 0"},
        {"ContactsHighest", [](FlagValues& f) { f.max_contacts_per_tick = 10000000; }, true, ""},
        {"ContactsTooMany", [](FlagValues& f) { f.max_contacts_per_tick = 10000001; }, false,
         "--max_contacts_per_tick: must be in [1, 10000000]"},
        {"VehiclesTooMany", [](FlagValues& f) { f.max_vehicles_per_session = 1000001; }, false,
         "--max_vehicles_per_session: must be in [1, 1000000]"},
        {"TicksZero", [](FlagValues& f) { f.max_ticks_per_step = 0; }, false,
         "--max_ticks_per_step: must be in [1, 1000000], got 0"},
        {"TicksTooMany", [](FlagValues& f) { f.max_ticks_per_step = 4294967296; }, false,
         "--max_ticks_per_step: must be in [1, 1000000]"},
        {"MessageZero", [](FlagValues& f) { f.max_receive_message_mib = 0; }, false,
         "--max_receive_message_mib: must be in [1, 1024], got 0"},
        {"MessageHighest", [](FlagValues& f) { f.max_receive_message_mib = 1024; }, true, ""},
        // 4096 << 20 wrapped to 0 in an int: the server refused every request.
        {"MessageWraps", [](FlagValues& f) { f.max_receive_message_mib = 4096; }, false,
         "--max_receive_message_mib: must be in [1, 1024], got 4096"},
        {"WorkersPerCore", [](FlagValues& f) { f.worker_threads = 0; }, true, ""},
        {"WorkersHighest", [](FlagValues& f) { f.worker_threads = 256; }, true, ""},
        {"WorkersTooMany", [](FlagValues& f) { f.worker_threads = 257; }, false,
         "--worker_threads: must be in [0, 256], got 257"},
        {"WorkersNegative", [](FlagValues& f) { f.worker_threads = -1; }, false,
         "--worker_threads: must be in [0, 256], got -1"},
        {"IdleNever", [](FlagValues& f) { f.session_idle_timeout_s = 0.0; }, true, ""},
        {"IdleOneSecond", [](FlagValues& f) { f.session_idle_timeout_s = 1.0; }, true, ""},
        {"IdleHighest", [](FlagValues& f) { f.session_idle_timeout_s = 1e7; }, true, ""},
        {"IdleNegative", [](FlagValues& f) { f.session_idle_timeout_s = -5.0; }, false,
         "--session_idle_timeout: must be 0 (never) or in [1, 1e+07] seconds, got -5"},
        {"IdleTooShort", [](FlagValues& f) { f.session_idle_timeout_s = 0.5; }, false,
         "--session_idle_timeout: must be 0 (never) or in [1, 1e+07] seconds, got 0.5"},
        {"IdleNaN", [](FlagValues& f) { f.session_idle_timeout_s = kNaN; }, false,
         "--session_idle_timeout: must be 0 (never) or in [1, 1e+07] seconds, got nan"},
        {"IdleInfinite", [](FlagValues& f) { f.session_idle_timeout_s = kInf; }, false,
         "--session_idle_timeout: must be 0 (never) or in [1, 1e+07] seconds, got inf"},
        {"BarrierTimeoutsNarrow",
         [](FlagValues& f) {
           f.min_barrier_timeout_s = 0.1;
           f.max_barrier_timeout_s = 2.0;
         },
         true, ""},
        {"BarrierTimeoutsOneValue",
         [](FlagValues& f) {
           f.min_barrier_timeout_s = 1.0;
           f.max_barrier_timeout_s = 1.0;
         },
         true, ""},
        {"BarrierTimeoutsWidest",
         [](FlagValues& f) {
           f.min_barrier_timeout_s = 0.001;
           f.max_barrier_timeout_s = 60.0;
         },
         true, ""},
        {"MinBarrierTimeoutTooShort", [](FlagValues& f) { f.min_barrier_timeout_s = 0.0005; },
         false, "--min_barrier_timeout_s: must be in [0.001, 60] seconds, got 0.0005"},
        {"MinBarrierTimeoutNaN", [](FlagValues& f) { f.min_barrier_timeout_s = kNaN; }, false,
         "--min_barrier_timeout_s: must be in [0.001, 60] seconds, got nan"},
        {"MaxBarrierTimeoutTooLong", [](FlagValues& f) { f.max_barrier_timeout_s = 61.0; },
         false, "--max_barrier_timeout_s: must be in [0.001, 60] seconds, got 61"},
        {"MaxBarrierTimeoutInfinite", [](FlagValues& f) { f.max_barrier_timeout_s = kInf; },
         false, "--max_barrier_timeout_s: must be in [0.001, 60] seconds, got inf"},
        {"MaxBarrierTimeoutZero", [](FlagValues& f) { f.max_barrier_timeout_s = 0.0; }, false,
         "--max_barrier_timeout_s: must be in [0.001, 60] seconds, got 0"},
        {"BarrierTimeoutsCrossed",
         [](FlagValues& f) {
           f.min_barrier_timeout_s = 5.0;
           f.max_barrier_timeout_s = 2.0;
         },
         false, "--min_barrier_timeout_s: must be at most --max_barrier_timeout_s (2), got 5"},
        {"LogLevelDebug", [](FlagValues& f) { f.log_level = "debug"; }, true, ""},
        {"LogLevelOff", [](FlagValues& f) { f.log_level = "off"; }, true, ""},
        // spdlog's from_str turned any unknown name into "off": logging silently disappeared.
        {"LogLevelUnknown", [](FlagValues& f) { f.log_level = "verbose"; }, false,
         "--log_level: must be one of trace, debug, info, warn, error, critical, off, got "
         "\"verbose\""},
        {"LogLevelCase", [](FlagValues& f) { f.log_level = "INFO"; }, false, "--log_level"},
        {"LogFormatJson", [](FlagValues& f) { f.log_format = "json"; }, true, ""},
        {"LogFormatUnknown", [](FlagValues& f) { f.log_format = "xml"; }, false,
         "--log_format: must be text or json, got \"xml\""},
        {"ListenAnyPort", [](FlagValues& f) { f.listen = "127.0.0.1:0"; }, true, ""},
        {"ListenWildcard", [](FlagValues& f) { f.listen = "0.0.0.0:50051"; }, true, ""},
        {"ListenName", [](FlagValues& f) { f.listen = "localhost:65535"; }, true, ""},
        {"ListenIpv6", [](FlagValues& f) { f.listen = "[::1]:50051"; }, true, ""},
        {"ListenNoPort", [](FlagValues& f) { f.listen = "127.0.0.1"; }, false,
         "--listen: must be host:port"},
        {"ListenEmptyPort", [](FlagValues& f) { f.listen = "127.0.0.1:"; }, false,
         "--listen: must be host:port"},
        {"ListenNoHost", [](FlagValues& f) { f.listen = ":50051"; }, false, "no host"},
        {"ListenPortTooBig", [](FlagValues& f) { f.listen = "127.0.0.1:65536"; }, false,
         "port is not a number in [0, 65535]"},
        {"ListenPortSigned", [](FlagValues& f) { f.listen = "127.0.0.1:+80"; }, false,
         "port is not a number in [0, 65535]"},
        {"ListenIpv6Bare", [](FlagValues& f) { f.listen = "::1:50051"; }, false,
         "IPv6 host must be in brackets"},
        {"ListenEscaped", [](FlagValues& f) { f.listen = "a\nb"; }, false, "got \"a\\nb\""},
        {"ReplicaPodName", [](FlagValues& f) { f.replica = "pitlane-0"; }, true, ""},
        {"ReplicaUppercase", [](FlagValues& f) { f.replica = "R1"; }, false,
         "--replica: must be 1 to 32 characters of a-z, 0-9 and '-', beginning and ending with "
         "a letter or digit, got \"R1\""},
        {"ReplicaDot", [](FlagValues& f) { f.replica = "r.1"; }, false, "--replica: must be"},
        {"ReplicaTrailingDash", [](FlagValues& f) { f.replica = "r1-"; }, false,
         "--replica: must be"},
        {"ReplicaTooLong", [](FlagValues& f) { f.replica = std::string(33, 'r'); }, false,
         "--replica: must be"},
    }),
    [](const ::testing::TestParamInfo<FlagCase>& info) { return info.param.name; });

TEST(OptionsFromFlagsTest, ConvertsEveryFlag) {
  FlagValues flags;
  flags.listen = "127.0.0.1:0";
  flags.max_sessions = 3;
  flags.max_vehicles_per_session = 40;
  flags.max_ticks_per_step = 500;
  flags.max_receive_message_mib = 1024;
  flags.log_level = "warn";
  flags.log_format = "json";
  flags.worker_threads = 7;
  flags.session_idle_timeout_s = 60.0;
  flags.min_barrier_timeout_s = 0.25;
  flags.max_barrier_timeout_s = 4.0;
  flags.scenario = "demo";
  flags.scenario_dir = "/tmp/scenarios";
  flags.replica = "r2";
  absl::StatusOr<StartupOptions> options = OptionsFromFlags(flags, 4);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server.listen_address, "127.0.0.1:0");
  EXPECT_EQ(options->server.limits.max_sessions, 3u);
  EXPECT_EQ(options->server.limits.max_vehicles_per_session, 40u);
  EXPECT_EQ(options->server.limits.max_ticks_per_step, 500u);
  EXPECT_EQ(options->server.limits.session_idle_timeout_s, 60.0);
  EXPECT_EQ(options->server.limits.clock_limits.min_barrier_timeout_s, 0.25);
  EXPECT_EQ(options->server.limits.clock_limits.max_barrier_timeout_s, 4.0);
  EXPECT_EQ(options->server.max_receive_message_bytes, 1024 << 20);
  EXPECT_EQ(options->server.worker_threads, 7);
  EXPECT_EQ(options->server.startup_scenario, "demo");
  EXPECT_EQ(options->server.scenario_dir, "/tmp/scenarios");
  EXPECT_EQ(options->server.limits.replica, "r2");
  EXPECT_EQ(options->log_level, spdlog::level::warn);
  EXPECT_EQ(options->log_format, LogFormat::kJson);
}

TEST(OptionsFromFlagsTest, WarnsWhenTheAdminTokenWouldCrossTheNetworkInClear) {
  FlagValues flags;
  flags.auth = "token";
  flags.http_listen = "127.0.0.1:8080";
  EXPECT_THAT(OptionsFromFlags(flags, 2)->warnings, IsEmpty());
  flags.http_listen = "10.0.0.5:8080";
  EXPECT_THAT(OptionsFromFlags(flags, 2)->warnings,
              ElementsAre(HasSubstr("--http_listen=10.0.0.5:8080 is plain HTTP on the network")));
  flags.http_listen = "";  // Off.
  EXPECT_THAT(OptionsFromFlags(flags, 2)->warnings, IsEmpty());
  flags.auth = "none";  // No token to leak.
  flags.allow_unauthenticated_remote_access = true;
  flags.http_listen = "0.0.0.0:8080";
  EXPECT_THAT(OptionsFromFlags(flags, 2)->warnings, IsEmpty());
}

TEST(OptionsFromFlagsTest, ZeroWorkersMeansOnePerCoreWithinTheCap) {
  FlagValues flags;
  flags.worker_threads = 0;
  EXPECT_EQ(OptionsFromFlags(flags, 6)->server.worker_threads, 6);
  EXPECT_EQ(OptionsFromFlags(flags, 0)->server.worker_threads, 1);  // Core count unknown.
  EXPECT_EQ(OptionsFromFlags(flags, 1000)->server.worker_threads, 256);
}

}  // namespace
}  // namespace pitlane::app

namespace pitlane::app {
namespace {

// --auth with --listen and an admin token: the mode the server runs in, or the refusal.
struct AuthCase {
  std::string name;
  std::string listen;
  std::string auth;
  std::string admin_token_env;
  bool allow_remote;
  std::optional<api::AuthMode> mode;  // nullopt: refused with `message`.
  bool generated = false;             // The admin token was generated.
  std::string message;
};

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class AuthModeTest : public ::testing::TestWithParam<AuthCase> {};

constexpr char kToken[] = "plt_abcdefghijklmnopqrstuvwxyz234567";

TEST_P(AuthModeTest, ResolvesTheModeOrRefusesNamingTheFlag) {
  const AuthCase& c = GetParam();
  FlagValues flags;
  flags.listen = c.listen;
  flags.auth = c.auth;
  flags.admin_token_env = c.admin_token_env;
  flags.allow_unauthenticated_remote_access = c.allow_remote;
  absl::StatusOr<StartupOptions> options = OptionsFromFlags(flags, 2);
  if (!c.mode.has_value()) {
    EXPECT_THAT(options, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
    if (!c.admin_token_env.empty()) {
      EXPECT_THAT(options.status().message(), Not(HasSubstr(c.admin_token_env)));
    }
    return;
  }
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server.access.mode, *c.mode);
  EXPECT_EQ(options->admin_token_generated, c.generated);
  if (*c.mode == api::AuthMode::kToken) {
    EXPECT_TRUE(auth::LooksLikeToken(options->server.admin_token));
    if (!c.generated) {
      EXPECT_EQ(options->server.admin_token, c.admin_token_env);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Auth, AuthModeTest,
    ::testing::ValuesIn(std::vector<AuthCase>{
        {"AutoOnLoopbackIsNone", "127.0.0.1:50051", "auto", "", false, api::AuthMode::kNone},
        {"AutoOnIpv6LoopbackIsNone", "[::1]:50051", "auto", "", false, api::AuthMode::kNone},
        {"AutoOnLocalhostIsNone", "localhost:0", "auto", "", false, api::AuthMode::kNone},
        {"AutoOnTheWildcardIsTokenGenerated", "0.0.0.0:50051", "auto", "", false,
         api::AuthMode::kToken, true},
        {"AutoOnALanAddressIsToken", "192.168.1.20:50051", "auto", kToken, false,
         api::AuthMode::kToken},
        {"AutoWithAnAdminTokenIsToken", "127.0.0.1:50051", "auto", kToken, false,
         api::AuthMode::kToken},
        {"TokenOnLoopback", "127.0.0.1:0", "token", "", false, api::AuthMode::kToken, true},
        {"NoneOnTheWildcardIsRefused", "0.0.0.0:50051", "none", "", false, std::nullopt, false,
         "--allow_unauthenticated_remote_access"},
        {"NoneOnTheWildcardWhenAllowed", "0.0.0.0:50051", "none", "", true,
         api::AuthMode::kNone},
        {"NoneWithAnAdminToken", "127.0.0.1:0", "none", kToken, false, std::nullopt, false,
         "use --auth=token"},
        {"UnknownMode", "127.0.0.1:0", "tokens", "", false, std::nullopt, false,
         "--auth: must be auto, token or none"},
        {"MalformedAdminToken", "127.0.0.1:0", "token", "hunter2-secret", false, std::nullopt,
         false, "PITLANE_ADMIN_TOKEN: the admin token must be"},
    }),
    [](const ::testing::TestParamInfo<AuthCase>& info) { return info.param.name; });

TEST(AuthModeTest, AnHttpEndpointOnTheNetworkNeedsTokensToo) {
  FlagValues flags;
  flags.listen = "127.0.0.1:50051";
  flags.http_listen = "0.0.0.0:8080";
  absl::StatusOr<StartupOptions> options = OptionsFromFlags(flags, 2);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server.access.mode, api::AuthMode::kToken);
  flags.auth = "none";
  EXPECT_THAT(OptionsFromFlags(flags, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--auth=none: --http_listen=0.0.0.0:8080 is reachable")));
  flags.allow_unauthenticated_remote_access = true;
  EXPECT_EQ(OptionsFromFlags(flags, 2)->server.access.mode, api::AuthMode::kNone);
  flags.auth = "auto";
  flags.allow_unauthenticated_remote_access = false;
  flags.http_listen = "";  // Off: only --listen counts.
  EXPECT_EQ(OptionsFromFlags(flags, 2)->server.access.mode, api::AuthMode::kNone);
}

}  // namespace
}  // namespace pitlane::app
