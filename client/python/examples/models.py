"""Drives one vehicle of every model through the same short script, side by side.

Each model is driven with its own natural controls (see ``pitlane.control`` and
docs/vehicle-models.md): kinematic_bicycle and single_track take an acceleration
and a steering angle; front_wheel_drive, all_wheel_drive and force_based the
throttle and brake pedals and a steering angle; physics_body a target speed and
a yaw rate. Every vehicle has its own lane and follows the same script:
accelerate to 10 m/s, hold a gentle left turn, then brake to a stop. Once per
simulated second it prints a row per vehicle: pose, speed, yaw rate and, for
the models with a mass, their energies.

Run a server, then: python3 models.py --address 127.0.0.1:50051
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position

TARGET_SPEED_MPS = 10.0
STEERING_RAD = 0.05  # Gentle: a radius of about L / tan(0.05) = 54 m.
WHEELBASE_M = 2.7  # The default wheelbase; physics_body turns as if it had one.
LANE_SPACING_M = 5.0
ACCEL_GAIN_1PS = 5.0  # m/s² asked for per m/s of speed error (the server clamps it).
PEDAL_GAIN_SPM = 1.0  # Pedal travel per m/s of speed error (each pedal in [0, 1]).

# Which controls each model reads (any other control field is rejected).
ACCELERATION_MODELS = {"kinematic_bicycle", "single_track", "four_wheel"}
PEDAL_MODELS = {"front_wheel_drive", "all_wheel_drive", "force_based"}
TARGET_SPEED_MODELS = {"physics_body"}

# Every model the server's API knows: the fields of VehicleSpec's `model` oneof.
ALL_MODELS = [f.name for f in pitlane.pb.VehicleSpec.DESCRIPTOR.oneofs_by_name["model"].fields]
DRIVEN_MODELS = [m for m in ALL_MODELS
                 if m in ACCELERATION_MODELS | PEDAL_MODELS | TARGET_SPEED_MODELS]

# Per-model spawn options (none needed today: every model reaches 10 m/s with its defaults;
# physics_body's accelerator device makes up its drag of 2 % per 50 Hz frame).
SPAWN_OPTIONS = {}


def plan(t_s, seconds):
    """The script: (target speed, steering angle) at sim time t_s of the run."""
    if t_s < seconds / 3:
        return TARGET_SPEED_MPS, 0.0  # Accelerate, straight ahead.
    if t_s < 2 * seconds / 3:
        return TARGET_SPEED_MPS, STEERING_RAD  # Hold a gentle left turn.
    return 0.0, 0.0  # Brake to a stop, wheels straight.


def clamp01(value):
    return min(max(value, 0.0), 1.0)


def controls(model, vehicle, target_mps, steer_rad):
    """One vehicle's controls in its model's own fields: a P controller on speed."""
    error = target_mps - vehicle.speed_mps
    vid = vehicle.vehicle_id
    if model in TARGET_SPEED_MODELS:
        # The accelerator device holds the target by itself; no wheels, so turn
        # at the yaw rate a car with this steering angle would have: v tan(d) / L.
        yaw_rate = vehicle.speed_mps * math.tan(steer_rad) / WHEELBASE_M
        return pitlane.control(vid, target_speed_mps=target_mps, yaw_rate_radps=yaw_rate)
    if model in PEDAL_MODELS:  # Throttle when too slow, brake when too fast.
        return pitlane.control(vid, throttle=clamp01(PEDAL_GAIN_SPM * error),
                               brake=clamp01(-PEDAL_GAIN_SPM * error),
                               steering_angle_rad=steer_rad)
    # An acceleration model. Asking for 0 at the target matters when stopping:
    # a held braking command would carry the car through zero into reverse.
    return pitlane.control(vid, acceleration_mps2=ACCEL_GAIN_1PS * error,
                           steering_angle_rad=steer_rad)


def run(address, seconds=12.0, tick_rate_hz=50.0):
    """Runs the script; returns {model: [its VehicleState at tick 0, 1, ...]}."""
    with pitlane.Client(address) as sim:
        sid = sim.create_session(name="models", tick_rate_hz=tick_rate_hz).session_id
        try:
            specs = [pitlane.vehicle_spec(model=model, name=model, y_m=lane * LANE_SPACING_M,
                                          **SPAWN_OPTIONS.get(model, {}))
                     for lane, model in enumerate(DRIVEN_MODELS)]
            model_of = dict(zip(sim.spawn_vehicles(sid, specs), DRIVEN_MODELS))
            history = {model: [] for model in DRIVEN_MODELS}
            last_tick = round(seconds * tick_rate_hz)
            state = sim.get_state(sid)
            while True:
                for vehicle in state.vehicles:
                    history[model_of[vehicle.vehicle_id]].append(vehicle)
                if state.time.tick == last_tick:
                    return history
                target, steer = plan(state.time.sim_time_s, seconds)
                sim.set_controls(sid, [controls(model_of[v.vehicle_id], v, target, steer)
                                       for v in state.vehicles])
                state = sim.step(sid)
        finally:
            sim.delete_session(sid)


def print_table(history, tick_rate_hz):
    """Prints one row per vehicle for every simulated second."""
    print(f"{'t [s]':>5}  {'model':<18}{'x [m]':>8}{'y [m]':>8}{'yaw [rad]':>10}"
          f"{'v [m/s]':>9}{'r [rad/s]':>10}  energy (models with mass)")
    ticks = len(next(iter(history.values())))
    for tick in range(0, ticks, round(tick_rate_hz)):
        for model, states in history.items():
            v = states[tick]
            energy = "".join(f"  {label} {joules / 1e3:6.1f} kJ" for label, joules in
                             (("kinetic", v.kinetic_energy_j),
                              ("dissipated", v.dissipated_energy_j)) if joules != 0.0)
            print(f"{tick / tick_rate_hz:5.1f}  {model:<18}{v.x_m:8.2f}{v.y_m:8.2f}"
                  f"{v.yaw_rad:+10.3f}{v.speed_mps:9.3f}{v.yaw_rate_radps:+10.3f}{energy}")
        print()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--seconds", type=float, default=12.0,
                        help="simulated time: a third each to accelerate, turn and brake")
    parser.add_argument("--tick_rate_hz", type=float, default=50.0)
    args = parser.parse_args()
    for model in ALL_MODELS:
        if model not in DRIVEN_MODELS:
            print(f"skipping {model}: this example does not know its controls", file=sys.stderr)
    print_table(run(args.address, args.seconds, args.tick_rate_hz), args.tick_rate_hz)


if __name__ == "__main__":
    main()
