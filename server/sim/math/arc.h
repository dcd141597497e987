// The exact pose update along a circular arc, shared by the models whose path over a tick is
// one (kinematic_bicycle's exact-arc integrator, force_based).
#ifndef PITLANE_SERVER_SIM_MATH_ARC_H_
#define PITLANE_SERVER_SIM_MATH_ARC_H_

#include "server/sim/math/geometry.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {

// Moves the point (x_m, y_m) heading yaw_rad (whose cos and sin are cos_yaw and sin_yaw) along
// an arc of curvature `curvature_1pm` (1/m, positive to the left) and signed length
// `distance_m` (m), and turns the heading with it; the straight line is the curvature-0 case
// of the same formulas, so no branch is needed. The heading turns by kappa s; the arc's chord
// has length s sinc(kappa s / 2) and points along the mid-arc heading yaw + kappa s / 2. The
// new cos and sin are the mid-arc ones turned by another half turn (a rotation, within a few
// ulps of SinCos of the new yaw, without a second SinCos). Variables by reference, so that a
// fleet loop keeps its columns in registers.
inline void AdvanceAlongArc(double distance_m, double curvature_1pm, double& x_m, double& y_m,
                            double& yaw_rad, double& cos_yaw, double& sin_yaw) {
  const double half_turn_rad = 0.5 * curvature_1pm * distance_m;
  const TurnTrig half_turn = TurnTrigOf(half_turn_rad);
  const double chord_m = distance_m * half_turn.sinc;
  double sin_mid, cos_mid;
  SinCos(yaw_rad + half_turn_rad, &sin_mid, &cos_mid);
  x_m += chord_m * cos_mid;
  y_m += chord_m * sin_mid;
  yaw_rad = WrapToPi(yaw_rad + 2.0 * half_turn_rad);
  cos_yaw = cos_mid * half_turn.cos - sin_mid * half_turn.sin;
  sin_yaw = sin_mid * half_turn.cos + cos_mid * half_turn.sin;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_ARC_H_
