"""The models example against the real server, checked against the physics.

models.run drives one vehicle of every model through 12 simulated seconds at
50 Hz: 4 s accelerating to 10 m/s straight ahead, 4 s in a gentle left turn
(steering 0.05 rad; physics_body at the yaw rate v tan(0.05) / 2.7), 4 s braking
to a stop with the wheels straight. A control decided on the state at tick k
acts over tick k + 1, so states 201..400 are the turn and 401..600 the braking.
"""

import math

import models
import pytest

from pitlane import pb

SECONDS, RATE = 12.0, 50.0
DT = 1.0 / RATE
TURN, BRAKE, END = 200, 400, 600  # First tick of each phase's decision, last tick.
SPEED_BAND_MPS = 0.25  # Cruise speed within 10 +- this (P control leaves <= 0.15 m/s).
STOPPED_MPS = 0.01
FIELDS = ("x_m", "y_m", "yaw_rad", "speed_mps", "steering_angle_rad", "acceleration_mps2",
          "yaw_rate_radps", "lateral_speed_mps", "kinetic_energy_j", "dissipated_energy_j")


@pytest.fixture(scope="module")
def history(address):
    return models.run(address, seconds=SECONDS, tick_rate_hz=RATE)


def test_every_model_of_the_api_is_driven(history):
    """A new model in the oneof needs controls in the example; it must not be skipped."""
    oneof = pb.VehicleSpec.DESCRIPTOR.oneofs_by_name["model"].fields
    assert sorted(history) == sorted(field.name for field in oneof)
    assert all(len(states) == END + 1 for states in history.values())


@pytest.mark.parametrize("model", models.DRIVEN_MODELS)
def test_states_are_finite_and_the_vehicle_keeps_its_lane_until_the_turn(history, model):
    states = history[model]
    for tick, v in enumerate(states):
        values = [getattr(v, f) for f in FIELDS] + list(v.wheel_loads_n)
        assert all(math.isfinite(x) for x in values), f"tick {tick}: {v}"
        assert v.speed_mps >= -1e-12, f"tick {tick}: reversed, {v.speed_mps} m/s"
        assert not v.crashed
    lane_y = models.DRIVEN_MODELS.index(model) * models.LANE_SPACING_M
    for v in states[:TURN + 1]:  # Straight ahead along +x on its own lane.
        assert v.yaw_rad == 0.0 and v.y_m == pytest.approx(lane_y, abs=1e-12)
    # Straight ahead the distance is the integral of the speed, which only grows: every
    # model's tick lies between the left and right Riemann sums of the reported speeds.
    speeds = [v.speed_mps for v in states[:TURN + 1]]
    assert all(b >= a for a, b in zip(speeds, speeds[1:]))
    assert sum(speeds[:-1]) * DT - 1e-9 <= states[TURN].x_m <= sum(speeds[1:]) * DT + 1e-9


@pytest.mark.parametrize("model", models.DRIVEN_MODELS)
def test_cruises_at_the_target_speed(history, model):
    speeds = [v.speed_mps for v in history[model]]
    target = models.TARGET_SPEED_MPS
    cruise = speeds[TURN:BRAKE + 1]
    assert min(cruise) >= target - SPEED_BAND_MPS, f"too slow: {min(cruise)} m/s"
    assert max(speeds) <= target + SPEED_BAND_MPS, f"overshot: {max(speeds)} m/s"


@pytest.mark.parametrize("model", models.DRIVEN_MODELS)
def test_turns_left_at_the_yaw_rate_of_its_steering(history, model):
    """Yaw rate v tan(d) / L with L = 2.7 m; single_track's wheelbase (l_f + l_r of
    the BMW preset, 2.58 m) makes it about 5 % faster, so allow 10 %."""
    turn = history[model][TURN + 1:BRAKE + 1]
    assert all(v.yaw_rate_radps > 0.0 for v in turn)
    assert all(b.yaw_rad > a.yaw_rad for a, b in zip(turn, turn[1:]))  # No wrap: < 1 rad.
    for v in turn[25:]:  # After 0.5 s: single_track's wheels ramp at 0.4 rad/s.
        expected = v.speed_mps * math.tan(models.STEERING_RAD) / models.WHEELBASE_M
        assert v.yaw_rate_radps == pytest.approx(expected, rel=0.10)
    turned = turn[-1].yaw_rad - history[model][TURN].yaw_rad
    assert turned == pytest.approx(4.0 * 10.0 * math.tan(0.05) / 2.7, rel=0.10)


@pytest.mark.parametrize("model", models.DRIVEN_MODELS)
def test_brakes_to_a_stop_and_stays_stopped(history, model):
    states = history[model]
    first_stopped = next(t for t in range(BRAKE, END + 1)
                         if abs(states[t].speed_mps) < STOPPED_MPS)
    assert first_stopped <= END - int(RATE), "took longer than 3 s to stop"
    for v in states[first_stopped:]:
        assert abs(v.speed_mps) < STOPPED_MPS and abs(v.yaw_rate_radps) < 1e-3
    last = states[-int(RATE):]  # The last second: parked, it creeps well under 1 cm.
    assert math.dist((last[0].x_m, last[0].y_m), (last[-1].x_m, last[-1].y_m)) < 0.01
    assert abs(states[-1].speed_mps) < 1e-3


def test_physics_body_holds_its_target_exactly_and_moves_without_sliding(history):
    states = history["physics_body"]
    assert all(v.speed_mps == pytest.approx(10.0, abs=1e-12) for v in states[TURN:BRAKE + 1])
    for before, after in zip(states[TURN:BRAKE], states[TURN + 1:BRAKE + 1]):
        # position += forward(yaw) * v * dt with the heading and speed from before the tick.
        assert after.x_m - before.x_m == pytest.approx(
            before.speed_mps * DT * math.cos(before.yaw_rad), abs=1e-9)
        assert after.y_m - before.y_m == pytest.approx(
            before.speed_mps * DT * math.sin(before.yaw_rad), abs=1e-9)
    assert states[-1].speed_mps == 0.0  # The accelerator device stops it exactly.
    assert all(v.kinetic_energy_j == 0.0 and v.steering_angle_rad == 0.0 for v in states)


def test_force_based_energy(history):
    """Kinetic energy is 1/2 m v² (default mass 1200 kg); the losses only grow; with
    the throttle released (braking) kinetic + dissipated energy is conserved."""
    states = history["force_based"]
    for v in states:
        assert v.kinetic_energy_j == pytest.approx(0.5 * 1200.0 * v.speed_mps ** 2,
                                                   rel=1e-9, abs=1e-9)
    lost = [v.dissipated_energy_j for v in states]
    assert all(b >= a for a, b in zip(lost, lost[1:])) and lost[TURN] > 0.0
    total = states[BRAKE].kinetic_energy_j + states[BRAKE].dissipated_energy_j
    for v in states[BRAKE:]:
        assert v.kinetic_energy_j + v.dissipated_energy_j == pytest.approx(total, rel=1e-9)


def test_single_track_energy(history):
    """Kinetic energy 1/2 m v² + 1/2 I r² with the BMW preset's m and I."""
    mass_kg, inertia_kgm2 = 1093.3, 1791.6
    states = history["single_track"]
    for v in states:
        expected = 0.5 * mass_kg * v.speed_mps ** 2 + 0.5 * inertia_kgm2 * v.yaw_rate_radps ** 2
        assert v.kinetic_energy_j == pytest.approx(expected, rel=1e-4, abs=1e-9)
    lost = [v.dissipated_energy_j for v in states]
    assert all(b >= a for a, b in zip(lost, lost[1:]))
    kinetic_at_brake = states[BRAKE].kinetic_energy_j
    assert lost[-1] - lost[BRAKE] >= 0.99 * kinetic_at_brake  # The brakes took it all.


def test_front_and_all_wheel_drive_agree_on_a_dry_road(history):
    """The default engine (3.5 m/s²) is below both drives' grip limits (4.9 and
    9.8 m/s²), so the two cars drive identically, one lane apart."""
    offset = models.LANE_SPACING_M * (models.DRIVEN_MODELS.index("all_wheel_drive")
                                      - models.DRIVEN_MODELS.index("front_wheel_drive"))
    for fwd, awd in zip(history["front_wheel_drive"], history["all_wheel_drive"]):
        assert awd.speed_mps == fwd.speed_mps and awd.yaw_rad == fwd.yaw_rad
        assert awd.x_m == fwd.x_m and awd.y_m == pytest.approx(fwd.y_m + offset, abs=1e-9)
