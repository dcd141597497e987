#include "server/sim/vehicles/kinematic_bicycle.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/base/macros.h"
#include "server/sim/math/arc.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {
namespace {

// tan(steer) / wheelbase: the path curvature of a steering angle, 1/m. tan from SinCos, so
// that it does not depend on the C library.
inline double Curvature(double steer_rad, double wheelbase_m) {
  double sin_steer;
  double cos_steer;
  SinCos(steer_rad, &sin_steer, &cos_steer);
  return sin_steer / cos_steer / wheelbase_m;
}

// The new speed and the signed distance covered in one tick of constant acceleration `a`
// from speed `v0`, with the speed held within [-max_reverse, max_forward]. When the limit is
// reached after t_hit seconds, the rest of the tick runs at the limit:
//   s = (v0 + v_lim) / 2 * t_hit + v_lim * (dt - t_hit),  t_hit = (v_lim - v0) / a.
struct Longitudinal {
  double speed_mps;
  double distance_m;
};

inline Longitudinal AdvanceLongitudinal(const VehicleLimits& limits, double v0, double a,
                                        double dt) {
  const double v_free = v0 + a * dt;
  const double v_lim = std::clamp(v_free, -limits.max_reverse_speed_mps, limits.max_speed_mps);
  if (v_lim == v_free) return {v_free, 0.5 * (v0 + v_free) * dt};
  // v_free left the range, so a != 0 and the limit lies between v0 and v_free.
  const double t_hit = std::clamp((v_lim - v0) / a, 0.0, dt);
  return {v_lim, 0.5 * (v0 + v_lim) * t_hit + v_lim * (dt - t_hit)};
}

// Semi-implicit Euler, in the order seed 003 and the reference notes give: speed first, then
// heading from the new speed, then position from the new speed and heading.
inline void AdvanceSemiImplicitEuler(const KinematicBicycleParams& params, double curvature_1pm,
                                     double a, double dt, double& x, double& y, double& yaw,
                                     double& v, double& cos_yaw, double& sin_yaw) {
  // min/max rather than std::clamp: branch-free, and in a fleet some vehicles sit at a speed
  // limit and others do not, in no pattern a branch predictor could learn.
  v = std::min(std::max(v + a * dt, -params.limits.max_reverse_speed_mps),
               params.limits.max_speed_mps);
  yaw = WrapToPi(yaw + v * curvature_1pm * dt);
  SinCos(yaw, &sin_yaw, &cos_yaw);
  x += v * cos_yaw * dt;
  y += v * sin_yaw * dt;
}

// Exact for inputs held over the tick. Heading is linear in arc length (yaw' = kappa * s'),
// so the rear axle moves along an arc of curvature kappa and length s whatever the speed
// profile.
inline void AdvanceExactArc(const KinematicBicycleParams& params, double curvature_1pm, double a,
                            double dt, double& x, double& y, double& yaw, double& v,
                            double& cos_yaw, double& sin_yaw) {
  const Longitudinal step = AdvanceLongitudinal(params.limits, v, a, dt);
  AdvanceAlongArc(step.distance_m, curvature_1pm, x, y, yaw, cos_yaw, sin_yaw);
  v = step.speed_mps;
}

// Turns the wheels from `steer` towards `command` (whose curvature is `command_curvature`), by
// at most rate * dt; updates the curvature they steer. Returns whether they reached it.
inline bool TurnWheels(const KinematicBicycleParams& params, double command,
                       double command_curvature, double dt, double& steer, double& curvature) {
  if (TurnWheelsTowards(command, params.limits.max_steering_rate_radps * dt, steer)) {
    curvature = command_curvature;
    return true;
  }
  curvature = Curvature(steer, params.wheelbase_m);
  return false;
}

// One tick of one vehicle with the wheel angle in effect; the state is passed as separate
// variables so that the fleet loop keeps its columns in registers.
inline void Advance(const KinematicBicycleParams& params, double acceleration_command,
                    double curvature, double dt, double inv_dt, double& x, double& y,
                    double& yaw, double& v, double& achieved_acceleration, double& cos_yaw,
                    double& sin_yaw) {
  const double v0 = v;
  const double a = ClampAcceleration(params.limits, v0, acceleration_command);
  switch (params.integrator) {
    case BicycleIntegrator::kSemiImplicitEuler:
      AdvanceSemiImplicitEuler(params, curvature, a, dt, x, y, yaw, v, cos_yaw, sin_yaw);
      break;
    case BicycleIntegrator::kExactArc:
      AdvanceExactArc(params, curvature, a, dt, x, y, yaw, v, cos_yaw, sin_yaw);
      break;
  }
  achieved_acceleration = (v - v0) * inv_dt;
}

}  // namespace

KinematicBicycleInput MakeKinematicBicycleInput(const KinematicBicycleParams& params,
                                                double acceleration_mps2,
                                                double steering_angle_rad) {
  const double max_steer = params.limits.max_steering_angle_rad;
  const double steer = std::clamp(steering_angle_rad, -max_steer, max_steer);
  return KinematicBicycleInput{
      .acceleration_mps2 = acceleration_mps2,
      .steering_angle_rad = steer,
      .curvature_1pm = Curvature(steer, params.wheelbase_m),
  };
}

double ClampAcceleration(const VehicleLimits& limits, double speed_mps, double acceleration_mps2) {
  // Opposite signs lower |speed|; at rest, or with no acceleration, nothing is braking.
  // Written without branches: in a fleet the signs vary from vehicle to vehicle.
  const bool lowers_speed = speed_mps * acceleration_mps2 < 0.0;
  const double limit = lowers_speed ? limits.max_braking_mps2 : limits.max_acceleration_mps2;
  return std::min(std::max(acceleration_mps2, -limit), limit);
}

void StepKinematicBicycle(const KinematicBicycleParams& params, const KinematicBicycleInput& input,
                          double dt_s, KinematicBicycleState& state) {
  // The same arithmetic as StepFleet, one vehicle at a time.
  double curvature = input.curvature_1pm;
  if (state.steering_rad != input.steering_angle_rad) {
    TurnWheels(params, input.steering_angle_rad, input.curvature_1pm, dt_s, state.steering_rad,
               curvature);
  }
  double cos_yaw, sin_yaw;  // Not part of the single-vehicle state.
  Advance(params, input.acceleration_mps2, curvature, dt_s, 1.0 / dt_s, state.pose.x_m,
          state.pose.y_m, state.pose.yaw_rad, state.speed_mps, state.acceleration_mps2, cos_yaw,
          sin_yaw);
}

void KinematicBicycleFleet::Append(std::uint32_t row, const VehicleSpec& resolved_spec,
                                   const KinematicBicycleSpec& model) {
  ABSL_ASSERT(rows.empty() || row > rows.back());
  rows.push_back(row);
  params.push_back(KinematicBicycleParams{
      .wheelbase_m = model.wheelbase_m,
      .limits = LimitsOf(resolved_spec),
      .integrator = model.integrator,
  });
  drive.emplace_back();
  steering_command_rad.push_back(0.0);
  steering_command_curvature_1pm.push_back(0.0);
  acceleration_mps2.push_back(0.0);
  steering_rad.push_back(0.0);
  is_turning.push_back(0);
}

void KinematicBicycleFleet::Append(std::uint32_t row, const VehicleSpec& resolved_spec,
                                   double /*dt_s*/, VehicleTable& /*table*/) {
  Append(row, resolved_spec, std::get<KinematicBicycleSpec>(resolved_spec.model));
}

void KinematicBicycleFleet::Erase(std::size_t index) {
  ABSL_ASSERT(index < size());
  const auto erase = [index](auto& column) { column.erase(column.begin() + index); };
  erase(rows);
  erase(params);
  erase(drive);
  erase(steering_command_rad);
  erase(steering_command_curvature_1pm);
  erase(acceleration_mps2);
  erase(steering_rad);
  erase(is_turning);
  // Renumber the turning list past the erased vehicle.
  std::erase(turning, static_cast<std::uint32_t>(index));
  for (std::uint32_t& i : turning) {
    if (i > index) --i;
  }
}

void KinematicBicycleFleet::SetInput(std::size_t index, const KinematicBicycleInput& input) {
  drive[index].acceleration_command_mps2 = input.acceleration_mps2;
  steering_command_rad[index] = input.steering_angle_rad;
  steering_command_curvature_1pm[index] = input.curvature_1pm;
  if (steering_rad[index] != input.steering_angle_rad && is_turning[index] == 0) {
    is_turning[index] = 1;
    turning.push_back(static_cast<std::uint32_t>(index));
  }
}

void KinematicBicycleFleet::SetControls(std::size_t index, const VehicleInput& input) {
  SetInput(index, MakeKinematicBicycleInput(params[index], input.acceleration_mps2,
                                            input.steering_angle_rad));
}

void KinematicBicycleFleet::SetPose(std::size_t index, const Pose2& pose, VehicleTable& table) {
  table.SetPose(rows[index], pose);
}

void KinematicBicycleFleet::Halt(std::size_t index, VehicleTable& table) {
  table.speed_mps[rows[index]] = 0.0;
  acceleration_mps2[index] = 0.0;
  // The wheels straight at once (as every model's halt), and zero controls: the integrators
  // move nothing at zero speed.
  steering_rad[index] = 0.0;
  drive[index].curvature_1pm = 0.0;
  SetInput(index, MakeKinematicBicycleInput(params[index], 0.0, 0.0));
}

void KinematicBicycleFleet::Step(double dt_s, VehicleTable& table) {
  StepFleet(dt_s, *this, table);
}

KinematicBicycleState KinematicBicycleFleet::StateAt(std::size_t index,
                                                     const VehicleTable& table) const {
  const std::uint32_t row = rows[index];
  return KinematicBicycleState{
      .pose = table.PoseAt(row),
      .speed_mps = table.speed_mps[row],
      .acceleration_mps2 = acceleration_mps2[index],
      .steering_rad = steering_rad[index],
  };
}

VehicleReadout KinematicBicycleFleet::ReadoutAt(std::size_t index,
                                                const VehicleTable& table) const {
  return VehicleReadout{
      .steering_angle_rad = steering_rad[index],
      .acceleration_mps2 = acceleration_mps2[index],
      .yaw_rate_radps = table.speed_mps[rows[index]] * drive[index].curvature_1pm,
  };
}

void StepFleet(double dt_s, KinematicBicycleFleet& fleet, VehicleTable& table) {
  // Wheels still turning towards their command (each on its own, so order does not matter).
  for (std::size_t k = 0; k < fleet.turning.size();) {
    const std::uint32_t i = fleet.turning[k];
    if (TurnWheels(fleet.params[i], fleet.steering_command_rad[i],
                   fleet.steering_command_curvature_1pm[i], dt_s, fleet.steering_rad[i],
                   fleet.drive[i].curvature_1pm)) {
      fleet.is_turning[i] = 0;
      fleet.turning[k] = fleet.turning.back();
      fleet.turning.pop_back();
    } else {
      ++k;
    }
  }

  const double inv_dt = 1.0 / dt_s;
  const std::size_t n = fleet.size();
  const KinematicBicycleParams* params = fleet.params.data();
  const KinematicBicycleFleet::Drive* drive = fleet.drive.data();
  const std::uint32_t* rows = fleet.rows.data();
  double* a = fleet.acceleration_mps2.data();
  double* x = table.x_m.data();
  double* y = table.y_m.data();
  double* yaw = table.yaw_rad.data();
  double* v = table.speed_mps.data();
  double* cos_yaw = table.cos_yaw.data();
  double* sin_yaw = table.sin_yaw.data();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = rows[i];
    Advance(params[i], drive[i].acceleration_command_mps2, drive[i].curvature_1pm, dt_s, inv_dt,
            x[r], y[r], yaw[r], v[r], a[i], cos_yaw[r], sin_yaw[r]);
  }
}

}  // namespace pitlane::sim
