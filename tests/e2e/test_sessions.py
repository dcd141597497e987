"""Sessions: defaults, independence, listing and deletion."""

import math

import grpc
import pitlane
from pitlane import pb

from conftest import MAX_VEHICLES_PER_SESSION, assert_rpc_error


def test_create_session_fills_in_defaults(client, session_id):
    info = client.get_session(session_id)
    assert info.session_id == session_id
    assert info.config.name == "e2e"
    assert info.config.HasField("tick_rate_hz") and info.config.tick_rate_hz == 50.0
    assert info.config.HasField("max_vehicles")
    assert info.config.max_vehicles == MAX_VEHICLES_PER_SESSION
    assert info.config.clock_mode == pb.CLOCK_MODE_LOCKSTEP
    assert (info.time.tick, info.time.sim_time_s) == (0, 0.0)
    assert info.vehicle_count == 0 and not info.vehicles


def test_create_session_keeps_explicit_config(client, new_session):
    sid = new_session(name="custom", tick_rate_hz=20.0, seed=42, max_vehicles=3)
    config = client.get_session(sid).config
    assert (config.name, config.tick_rate_hz, config.seed, config.max_vehicles) == (
        "custom", 20.0, 42, 3)


def test_spawned_vehicle_spec_fills_in_defaults(client, session_id):
    car = client.spawn_vehicle(session_id, x_m=1.0, y_m=-2.0, yaw_rad=0.5, speed_mps=1.5,
                               name="car")
    (info,) = client.get_session(session_id).vehicles
    assert info.vehicle_id == car == 1
    spec = info.spec
    assert spec.name == "car"
    assert (spec.length_m, spec.width_m) == (4.5, 1.8)
    assert (spec.initial_pose.x_m, spec.initial_pose.y_m, spec.initial_pose.yaw_rad) == (
        1.0, -2.0, 0.5)
    assert spec.initial_speed_mps == 1.5
    bicycle = spec.kinematic_bicycle
    assert bicycle.wheelbase_m == 2.7
    assert math.isclose(bicycle.rear_overhang_m, (4.5 - 2.7) / 2.0, abs_tol=1e-12)
    assert bicycle.integrator == pb.BICYCLE_INTEGRATOR_SEMI_IMPLICIT_EULER
    limits = spec.limits
    assert (limits.max_steering_angle_rad, limits.max_acceleration_mps2,
            limits.max_braking_mps2, limits.max_speed_mps,
            limits.max_reverse_speed_mps) == (0.6, 3.0, 8.0, 30.0, 5.0)
    v = client.get_state(session_id).vehicles[0]
    assert (v.vehicle_id, v.x_m, v.y_m, v.yaw_rad, v.speed_mps) == (1, 1.0, -2.0, 0.5, 1.5)


def test_vehicle_ids_start_at_one_and_are_never_reused(client, session_id):
    specs = [pitlane.vehicle_spec(x_m=10.0 * i) for i in range(3)]
    assert client.spawn_vehicles(session_id, specs) == [1, 2, 3]
    client.remove_vehicle(session_id, 3)
    client.remove_vehicle(session_id, 1)
    assert client.spawn_vehicle(session_id) == 4
    state = client.get_state(session_id)
    assert [v.vehicle_id for v in state.vehicles] == [2, 4]
    assert client.get_session(session_id).vehicle_count == 2


def test_sessions_are_independent(client, new_session):
    a, b = new_session(name="a"), new_session(name="b")
    assert a != b
    assert client.spawn_vehicles(a, [pitlane.vehicle_spec(speed_mps=2.0)] * 2) == [1, 2]
    assert client.spawn_vehicle(b, speed_mps=4.0) == 1
    client.set_controls(b, {1: (1.0, 0.1)})
    b_before = client.get_state(b)

    client.set_controls(a, {1: (2.0, 0.5), 2: (-1.0, -0.5)})
    assert client.step(a, 25).time.tick == 25
    assert client.get_state(b) == b_before
    assert b_before.time.tick == 0

    listed = [s.session_id for s in client.list_sessions()]
    assert listed.index(a) < listed.index(b)  # Creation order.
    for s in client.list_sessions():
        assert not s.vehicles  # ListSessions leaves vehicles empty...
        if s.session_id == a:
            assert (s.vehicle_count, s.time.tick) == (2, 25)  # ...but counts them.

    assert client.delete_session(a).tick == 25
    listed = [s.session_id for s in client.list_sessions()]
    assert a not in listed and b in listed
    assert client.get_state(b) == b_before
    assert client.step(b, 1).time.tick == 1
    assert_rpc_error(lambda: client.get_session(a), grpc.StatusCode.NOT_FOUND, "session_id")


def test_session_ids_are_not_reused(client, new_session):
    first = new_session()
    client.delete_session(first)
    second = new_session()
    assert second != first
    assert_rpc_error(lambda: client.get_state(first), grpc.StatusCode.NOT_FOUND, "session_id")
