#include "server/sim/collision/contacts.h"

#include "gtest/gtest.h"

namespace pitlane::sim {
namespace {

TEST(Involves, EitherSideOfAVehiclePair) {
  const Contact contact{.pair = {.vehicle = 2, .other_kind = ObjectKind::kVehicle, .other_id = 5}};
  EXPECT_TRUE(Involves(contact, 2));
  EXPECT_TRUE(Involves(contact, 5));
  EXPECT_FALSE(Involves(contact, 3));
}

// Obstacle and wall ids are numbered apart from vehicle ids: vehicle 5 is not obstacle 5.
TEST(Involves, OnlyTheVehicleSideOfAnObstacleOrWallPair) {
  for (const ObjectKind kind : {ObjectKind::kObstacle, ObjectKind::kWall}) {
    const Contact contact{.pair = {.vehicle = 2, .other_kind = kind, .other_id = 5}};
    EXPECT_TRUE(Involves(contact, 2));
    EXPECT_FALSE(Involves(contact, 5));
  }
}

}  // namespace
}  // namespace pitlane::sim
