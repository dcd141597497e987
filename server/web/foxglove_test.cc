#include "server/web/foxglove.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pitlane::web::foxglove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(FoxgloveMessagesTest, ServerMessagesAreTheProtocolsJson) {
  const Json info = Json::parse(ServerInfo("Pitlane \"x\"", "abc"));
  EXPECT_EQ(info["op"], "serverInfo");
  EXPECT_EQ(info["name"], "Pitlane \"x\"");
  EXPECT_EQ(info["sessionId"], "abc");
  EXPECT_TRUE(info["capabilities"].is_array());

  const Channel channels[] = {
      {.id = 1, .topic = "/s/scene", .encoding = "json", .schema_name = "foxglove.SceneUpdate",
       .schema = R"({"type":"object"})", .schema_encoding = "jsonschema"},
      {.id = 4294967295u, .topic = "/s/world_state", .encoding = "protobuf",
       .schema_name = "pitlane.v1.WorldState", .schema = "AAEC", .schema_encoding = "protobuf"}};
  const Json advertise = Json::parse(Advertise(channels));
  EXPECT_EQ(advertise["op"], "advertise");
  ASSERT_EQ(advertise["channels"].size(), 2u);
  EXPECT_EQ(advertise["channels"][0]["schema"], R"({"type":"object"})");
  EXPECT_EQ(advertise["channels"][1]["id"], 4294967295u);
  EXPECT_EQ(advertise["channels"][1]["schemaEncoding"], "protobuf");

  const std::uint32_t gone[] = {3, 5};
  EXPECT_EQ(Unadvertise(gone), R"({"op":"unadvertise","channelIds":[3,5]})");
  EXPECT_EQ(Status(StatusLevel::kWarning, "no\n"), R"({"op":"status","level":1,"message":"no\n"})");
}

TEST(FoxgloveMessagesTest, MessageDataIsLittleEndian) {
  const std::string frame = MessageData(0x01020304u, 0x1122334455667788ull, "hi");
  EXPECT_EQ(frame, std::string("\x01\x04\x03\x02\x01\x88\x77\x66\x55\x44\x33\x22\x11hi", 15));
}

TEST(ParseClientMessageTest, SubscribeAndUnsubscribe) {
  const absl::StatusOr<ClientMessage> parsed = ParseClientMessage(
      R"({"op":"subscribe","subscriptions":[{"id":0,"channelId":7},{"id":2.0,"channelId":4294967295}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ClientMessage& subscribe = *parsed;
  EXPECT_EQ(subscribe.op, ClientMessage::Op::kSubscribe);
  EXPECT_THAT(subscribe.subscriptions,
              ElementsAre(Subscription{0, 7}, Subscription{2, 4294967295u}));
  const absl::StatusOr<ClientMessage> parsed_unsubscribe =
      ParseClientMessage(R"({"op":"unsubscribe","subscriptionIds":[2,0]})");
  ASSERT_TRUE(parsed_unsubscribe.ok()) << parsed_unsubscribe.status();
  const ClientMessage& unsubscribe = *parsed_unsubscribe;
  EXPECT_EQ(unsubscribe.op, ClientMessage::Op::kUnsubscribe);
  EXPECT_THAT(unsubscribe.subscription_ids, ElementsAre(2u, 0u));
}

struct BadCase {
  std::string name;
  std::string text;
  absl::StatusCode code;
  std::string message;
};

class ParseClientMessageBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseClientMessageBadTest, NamesTheField) {
  const absl::StatusOr<ClientMessage> parsed = ParseClientMessage(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), GetParam().code);
  EXPECT_THAT(parsed.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseClientMessageBadTest,
    ::testing::ValuesIn(std::vector<BadCase>{
        {"NotJson", "{op:", absl::StatusCode::kInvalidArgument, "message: must be a JSON object"},
        {"Array", "[]", absl::StatusCode::kInvalidArgument, "message: must be a JSON object"},
        {"NoOp", "{}", absl::StatusCode::kInvalidArgument, "op: must be a string"},
        {"OpNumber", R"({"op":1})", absl::StatusCode::kInvalidArgument, "op: must be a string"},
        {"UnknownOp", R"({"op":"advertise"})", absl::StatusCode::kUnimplemented,
         "op: \"advertise\" is not offered"},
        {"NoList", R"({"op":"subscribe"})", absl::StatusCode::kInvalidArgument,
         "subscriptions: must be an array"},
        {"EntryNotObject", R"({"op":"subscribe","subscriptions":[1]})",
         absl::StatusCode::kInvalidArgument, "subscriptions[0]: must be an object"},
        {"NoChannel", R"({"op":"subscribe","subscriptions":[{"id":1}]})",
         absl::StatusCode::kInvalidArgument, "subscriptions[0].channelId: missing"},
        {"Negative", R"({"op":"subscribe","subscriptions":[{"id":-1,"channelId":1}]})",
         absl::StatusCode::kInvalidArgument, "subscriptions[0].id: must be an integer"},
        {"TooBig", R"({"op":"subscribe","subscriptions":[{"id":4294967296,"channelId":1}]})",
         absl::StatusCode::kInvalidArgument, "subscriptions[0].id: must be an integer"},
        {"Fraction", R"({"op":"subscribe","subscriptions":[{"id":1.5,"channelId":1}]})",
         absl::StatusCode::kInvalidArgument, "subscriptions[0].id: must be an integer"},
        {"String", R"({"op":"unsubscribe","subscriptionIds":["1"]})",
         absl::StatusCode::kInvalidArgument, "subscriptionIds[0]: must be an integer"},
        {"Huge", std::string(kMaxClientMessageBytes + 1, ' '), absl::StatusCode::kInvalidArgument,
         "message: at most"},
        {"Deep", std::string(100000, '[') + std::string(100000, ']'),
         absl::StatusCode::kInvalidArgument, "message: must be a JSON object"},
    }),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(ParseClientMessageTest, TooManyEntries) {
  std::string text = R"({"op":"unsubscribe","subscriptionIds":[)";
  for (std::size_t i = 0; i <= kMaxEntriesPerMessage; ++i) text += i > 0 ? ",1" : "1";
  text += "]}";
  EXPECT_THAT(ParseClientMessage(text).status().message(),
              HasSubstr("subscriptionIds: at most 10000 entries"));
}

}  // namespace
}  // namespace pitlane::web::foxglove
