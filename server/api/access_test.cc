#include "server/api/access.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pitlane::api {
namespace {

// Peers as gRPC reports them: loopback ones are this machine's users (no quota), the rest are
// counted by host, without the port.
TEST(PeerHost, LoopbackIsEmptyOthersLoseThePort) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ipv4:127.0.0.1:51234", ""},
      {"ipv4:127.45.0.9:1", ""},
      {"ipv6:%5B::1%5D:51234", ""},
      {"ipv6:[::1]:51234", ""},
      {"ipv6:%5B::ffff:127.0.0.1%5D:51234", ""},
      {"unix:/tmp/pitlane.sock", ""},
      {"ipv4:10.0.0.7:51234", "ipv4:10.0.0.7"},
      {"ipv4:128.0.0.1:80", "ipv4:128.0.0.1"},
      {"ipv6:%5B2001:db8::7%5D:51234", "ipv6:2001:db8::7"},
      {"ipv6:%5B::ffff:10.0.0.7%5D:51234", "ipv6:::ffff:10.0.0.7"},
  };
  for (const auto& [peer, host] : cases) EXPECT_EQ(PeerHost(peer), host) << peer;
}

TEST(IsLoopbackAddress, OnlyAddressesOfThisMachineAlone) {
  for (const char* address : {"127.0.0.1:50051", "127.0.0.2:0", "[::1]:50051", "localhost:0"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"0.0.0.0:50051", "[::]:50051", "192.168.1.20:50051",
                              "127.lab.example.net:50051", "sim.lab.example:50051",
                              "[2001:db8::1]:50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

}  // namespace
}  // namespace pitlane::api
