#include "server/app/banner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ConnectAddressesTest, LoopbackIsConnectableAsIs) {
  const ConnectAddresses connect = ConnectAddressesFor("127.0.0.1:50051", "lab-3");
  EXPECT_EQ(connect.local, "127.0.0.1:50051");
  EXPECT_EQ(connect.remote, "");
}

TEST(ConnectAddressesTest, Ipv4WildcardNamesLoopbackAndThisHost) {
  const ConnectAddresses connect = ConnectAddressesFor("0.0.0.0:50051", "lab-3");
  EXPECT_EQ(connect.local, "127.0.0.1:50051");
  EXPECT_EQ(connect.remote, "lab-3:50051");
}

TEST(ConnectAddressesTest, Ipv6WildcardNamesLoopbackAndThisHost) {
  const ConnectAddresses connect = ConnectAddressesFor("[::]:7000", "lab-3");
  EXPECT_EQ(connect.local, "[::1]:7000");
  EXPECT_EQ(connect.remote, "lab-3:7000");
}

TEST(ConnectAddressesTest, UnknownHostNameSaysWhatToPutThere) {
  EXPECT_EQ(ConnectAddressesFor("0.0.0.0:1", "").remote, "<this host's address>:1");
}

TEST(BannerTest, WildcardNeverSuggestsConnectingToIt) {
  const std::string banner = Banner("0.0.0.0:50051", "lab-3", "", "");
  EXPECT_THAT(banner, StartsWith("Pitlane listening on 0.0.0.0:50051\n"));
  EXPECT_THAT(banner,
              HasSubstr("Connect: 127.0.0.1:50051 from this machine, lab-3:50051 from others"));
  EXPECT_THAT(banner, HasSubstr("Client(\"127.0.0.1:50051\")"));
  EXPECT_THAT(banner, HasSubstr("grpcurl -plaintext 127.0.0.1:50051 list"));
  // The only mention of the wildcard is the line that says what was bound.
  EXPECT_THAT(banner.substr(banner.find('\n')), Not(HasSubstr("0.0.0.0")));
}

TEST(BannerTest, LoopbackBannerNamesTheAddressAndTheStartupSession) {
  const std::string banner = Banner("127.0.0.1:4000", "lab-3", "demo", "s-abc");
  EXPECT_THAT(banner, StartsWith("Pitlane listening on 127.0.0.1:4000\n"));
  EXPECT_THAT(banner, Not(HasSubstr("Connect:")));
  EXPECT_THAT(banner, HasSubstr("Scenario \"demo\" is running as session s-abc"));
  EXPECT_THAT(banner, HasSubstr("--address 127.0.0.1:4000 --session s-abc"));
  EXPECT_THAT(banner, Not(HasSubstr("browser")));  // No HTTP endpoint.
}

TEST(BannerTest, NamesTheViewerForTheStartupSession) {
  const std::string banner = Banner("0.0.0.0:4000", "lab-3", "demo", "s-abc", "0.0.0.0:8080", "");
  EXPECT_THAT(banner, HasSubstr("Viewer:  http://127.0.0.1:8080/ in a browser; Foxglove and "
                                "Lichtblick: ws://127.0.0.1:8080/foxglove\n"));
  EXPECT_THAT(banner, HasSubstr("HTTP:    http://127.0.0.1:8080/metrics"));
  EXPECT_THAT(banner, HasSubstr("in a browser: http://127.0.0.1:8080/?session=s-abc\n"));
  EXPECT_THAT(banner, Not(HasSubstr("pip install")));
}

TEST(BannerTest, NamesThePythonClientsWheel) {
  const std::string banner = Banner("127.0.0.1:4000", "lab-3", "", "", "127.0.0.1:8080", "",
                                    "/python/pitlane_client-0.1.0-py3-none-any.whl");
  EXPECT_THAT(banner, HasSubstr("Client:  pip install "
                                "http://127.0.0.1:8080/python/pitlane_client-0.1.0-py3-none-any.whl\n"));
}

}  // namespace
}  // namespace pitlane::app
