"""Lockstep clock, control timing and clamping."""

import math

import pytest

RATE = 50.0
DT = 1.0 / RATE


def vehicle(state, vehicle_id=1):
    """The VehicleState of `vehicle_id` in a WorldState."""
    (found,) = [v for v in state.vehicles if v.vehicle_id == vehicle_id]
    return found


def test_control_applies_from_next_tick_and_holds(client, session_id):
    car = client.spawn_vehicle(session_id)
    response = client.set_controls(session_id, {car: (1.0, 0.0)})
    assert response.time.tick == 0
    assert response.applies_from_tick == 1
    assert vehicle(client.get_state(session_id), car).speed_mps == 0.0

    state = client.step(session_id, 1)
    assert state.time.tick == 1
    assert vehicle(state, car).speed_mps == pytest.approx(1.0 * DT, abs=1e-12)
    assert vehicle(state, car).acceleration_mps2 == pytest.approx(1.0, abs=1e-12)

    state = client.step(session_id, 9)
    assert state.time.tick == 10
    assert vehicle(state, car).speed_mps == pytest.approx(10 * DT, abs=1e-12)

    response = client.set_controls(session_id, {car: (0.0, 0.0)})
    assert (response.time.tick, response.applies_from_tick) == (10, 11)
    state = client.step(session_id, 5)
    assert vehicle(state, car).speed_mps == pytest.approx(10 * DT, abs=1e-12)


@pytest.mark.parametrize("rate", [50.0, 30.0, 7.0, 1000.0])
def test_sim_time_is_tick_over_rate(client, new_session, rate):
    sid = new_session(tick_rate_hz=rate)
    assert client.get_session(sid).config.tick_rate_hz == rate
    tick = 0
    for ticks in (1, 2, 7, 90, 1000, 1):
        state = client.step(sid, ticks)
        tick += ticks
        assert state.time.tick == tick
        assert state.time.sim_time_s == tick / rate


def test_get_state_does_not_advance_time(client, session_id):
    car = client.spawn_vehicle(session_id, speed_mps=3.0)
    client.set_controls(session_id, {car: (1.0, 0.3)})
    stepped = client.step(session_id, 4)
    for _ in range(3):
        assert client.get_state(session_id) == stepped
    assert client.get_session(session_id).time.tick == 4


@pytest.mark.parametrize(
    "limits, speed, control, expected_accel, expected_steer",
    [
        (None, 0.0, (0.0, 10.0), 0.0, 0.6),
        (None, 0.0, (0.0, -10.0), 0.0, -0.6),
        (None, 0.0, (100.0, 0.0), 3.0, 0.0),
        (None, 10.0, (-100.0, 0.0), -8.0, 0.0),  # Braking: max_braking_mps2.
        (None, -2.0, (100.0, 0.0), 8.0, 0.0),  # Braking while reversing.
        (None, -2.0, (-100.0, 0.0), -3.0, 0.0),  # Speeding up in reverse.
        ({"max_steering_angle_rad": 0.3, "max_acceleration_mps2": 1.5}, 0.0,
         (2.0, -0.5), 1.5, -0.3),
        ({"max_braking_mps2": 4.0}, 10.0, (-5.0, 0.25), -4.0, 0.25),
    ],
)
def test_controls_are_clamped_to_limits(
    client, session_id, limits, speed, control, expected_accel, expected_steer
):
    car = client.spawn_vehicle(session_id, speed_mps=speed, limits=limits)
    client.set_controls(session_id, {car: control})
    v = vehicle(client.step(session_id, 1), car)
    assert v.steering_angle_rad == pytest.approx(expected_steer, abs=1e-12)
    assert v.acceleration_mps2 == pytest.approx(expected_accel, abs=1e-12)
    assert v.speed_mps == pytest.approx(speed + expected_accel * DT, abs=1e-12)


@pytest.mark.parametrize(
    "limits, speed, accel, bound",
    [
        ({"max_speed_mps": 5.0}, 4.0, 3.0, 5.0),
        (None, 29.0, 3.0, 30.0),  # Default max_speed_mps.
        ({"max_reverse_speed_mps": 2.0}, 0.0, -3.0, -2.0),
        ({"max_reverse_speed_mps": 0.0}, 1.0, -8.0, 0.0),  # Cannot reverse.
    ],
)
def test_speed_stays_within_limits(client, session_id, limits, speed, accel, bound):
    car = client.spawn_vehicle(session_id, speed_mps=speed, limits=limits)
    client.set_controls(session_id, {car: (accel, 0.0)})
    for _ in range(60):
        v = vehicle(client.step(session_id, 1), car)
        if bound > 0:
            assert v.speed_mps <= bound
        else:
            assert v.speed_mps >= bound
    assert v.speed_mps == pytest.approx(bound, abs=1e-12)
    assert v.acceleration_mps2 == pytest.approx(0.0, abs=1e-12)  # Achieved, at the limit.


def test_yaw_is_always_wrapped(client, session_id):
    # Tight fast circles in both directions: several full turns in 300 ticks.
    left = client.spawn_vehicle(session_id, speed_mps=20.0, integrator="exact_arc")
    right = client.spawn_vehicle(session_id, speed_mps=20.0, yaw_rad=3.0)
    client.set_controls(session_id, {left: (0.0, 0.6), right: (0.0, -0.6)})
    for _ in range(300):
        for v in client.step(session_id, 1).vehicles:
            assert -math.pi < v.yaw_rad <= math.pi


@pytest.mark.parametrize(
    "yaw_in, yaw_out",
    [
        (0.5, 0.5),
        (math.pi, math.pi),
        (-math.pi, math.pi),  # (-pi, pi] excludes -pi.
        (7.0, 7.0 - 2.0 * math.pi),
        (-4.0, -4.0 + 2.0 * math.pi),
    ],
)
def test_initial_yaw_is_wrapped(client, session_id, yaw_in, yaw_out):
    car = client.spawn_vehicle(session_id, yaw_rad=yaw_in)
    assert vehicle(client.get_state(session_id), car).yaw_rad == pytest.approx(yaw_out, abs=1e-12)


def test_steering_rate_limit_ramps_the_wheels(client, session_id):
    # 0.5 rad/s at 50 Hz: 0.01 rad per tick towards the command; the state reports the wheel
    # angle in effect, which a new command reaches from the next tick on.
    car = client.spawn_vehicle(
        session_id, speed_mps=5.0, limits={"max_steering_rate_radps": 0.5}
    )
    client.set_controls(session_id, {car: (0.0, 0.3)})
    assert vehicle(client.get_state(session_id), car).steering_angle_rad == 0.0
    state = client.step(session_id, 10)
    assert vehicle(state, car).steering_angle_rad == pytest.approx(0.1, abs=1e-12)
    state = client.step(session_id, 25)
    assert vehicle(state, car).steering_angle_rad == 0.3
    spec = client.get_session(session_id).vehicles[0].spec
    assert spec.limits.max_steering_rate_radps == 0.5
