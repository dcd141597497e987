// Planar geometry shared by the simulation core.
#ifndef PITLANE_SERVER_SIM_MATH_GEOMETRY_H_
#define PITLANE_SERVER_SIM_MATH_GEOMETRY_H_

#include <cmath>
#include <numbers>

namespace pitlane::sim {

inline constexpr double kPi = std::numbers::pi;
inline constexpr double kTwoPi = 2.0 * std::numbers::pi;

// A planar pose in the world frame (right-handed, yaw counter-clockwise from +x).
struct Pose2 {
  double x_m = 0.0;      // Position east, metres.
  double y_m = 0.0;      // Position north, metres.
  double yaw_rad = 0.0;  // Heading, radians.
};

// An oriented box: what collision sees of a vehicle body.
struct OrientedBox {
  double center_x_m = 0.0;     // Box centre east, metres.
  double center_y_m = 0.0;     // Box centre north, metres.
  double yaw_rad = 0.0;        // Direction of the box's length axis, radians.
  double half_length_m = 0.0;  // Half the extent along yaw, metres.
  double half_width_m = 0.0;   // Half the extent across yaw, metres.
};

// Wraps an angle to (-pi, pi]. Exact for inputs already in range; one branch for the common
// case of an angle that left the range by less than a turn during a tick.
inline double WrapToPi(double angle_rad) {
  if (angle_rad > kPi || angle_rad <= -kPi) {
    angle_rad = std::remainder(angle_rad, kTwoPi);  // [-pi, pi]
    if (angle_rad <= -kPi) angle_rad += kTwoPi;
  }
  return angle_rad;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_GEOMETRY_H_
