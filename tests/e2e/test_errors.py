"""Bad input: every case fails with the documented status code and names the field.

A bystander session, stepped before these tests, must be untouched by all of
them (checked by the last test of this module).
"""

import math

import grpc
import pitlane
import pytest
from pitlane import pb

from conftest import (MAX_TICKS_PER_STEP, MAX_VEHICLES_PER_SESSION, assert_rpc_error,
                      running_server)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
NAN, INF = math.nan, math.inf


@pytest.fixture(scope="module")
def bystander(client):
    """A session with a moving car, and its state before the error tests."""
    sid = client.create_session(name="bystander").session_id
    car = client.spawn_vehicle(sid, speed_mps=3.0)
    client.set_controls(sid, {car: (0.5, 0.1)})
    client.step(sid, 7)
    yield sid, client.get_session(sid), client.get_state(sid)
    client.delete_session(sid)


@pytest.fixture(autouse=True)
def _bystander_first(bystander):
    """Creates the bystander before the first test of this module."""


# --- Session ids -------------------------------------------------------------------


def _rpcs_taking_a_session(sid):
    """(name, request) for every RPC that takes a session_id."""
    return [
        ("GetSession", pb.GetSessionRequest(session_id=sid)),
        ("DeleteSession", pb.DeleteSessionRequest(session_id=sid)),
        ("SpawnVehicle", pb.SpawnVehicleRequest(
            session_id=sid, vehicles=[pitlane.vehicle_spec()])),
        ("RemoveVehicle", pb.RemoveVehicleRequest(session_id=sid, vehicle_id=1)),
        ("SetControls", pb.SetControlsRequest(
            session_id=sid, controls=[pb.VehicleControl(vehicle_id=1)])),
        ("Step", pb.StepRequest(session_id=sid, ticks=1)),
        ("GetState", pb.GetStateRequest(session_id=sid)),
        ("StreamStates", pb.StreamStatesRequest(session_id=sid)),
    ]


def _call(client, rpc, request):
    if rpc == "StreamStates":
        return next(client.stub.StreamStates(request, timeout=10.0))
    return getattr(client.stub, rpc)(request, timeout=10.0)


@pytest.mark.parametrize(
    "sid, code, field",
    [
        ("s-does-not-exist", NOT_FOUND, "session_id"),
        ("", INVALID, "session_id"),
    ],
)
@pytest.mark.parametrize("rpc", [name for name, _ in _rpcs_taking_a_session("")])
def test_bad_session_id(client, rpc, sid, code, field):
    request = dict(_rpcs_taking_a_session(sid))[rpc]
    assert_rpc_error(lambda: _call(client, rpc, request), code, field)


# --- CreateSession -----------------------------------------------------------------


@pytest.mark.parametrize(
    "config, field",
    [
        (pb.SessionConfig(tick_rate_hz=0.0), "tick_rate_hz"),
        (pb.SessionConfig(tick_rate_hz=-50.0), "tick_rate_hz"),
        (pb.SessionConfig(tick_rate_hz=NAN), "tick_rate_hz"),
        (pb.SessionConfig(tick_rate_hz=INF), "tick_rate_hz"),
        (pb.SessionConfig(tick_rate_hz=10001.0), "tick_rate_hz"),
        (pb.SessionConfig(max_vehicles=0), "max_vehicles"),
        (pb.SessionConfig(max_vehicles=MAX_VEHICLES_PER_SESSION + 1), "max_vehicles"),
        (pb.SessionConfig(clock_mode=99), "clock_mode"),
        (pb.SessionConfig(name="x" * 129), "name"),
    ],
    ids=["rate_0", "rate_neg", "rate_nan", "rate_inf", "rate_high", "max_vehicles_0",
         "max_vehicles_high", "clock_mode_99", "long_name"],
)
def test_create_session_invalid_config(client, config, field):
    before = len(client.list_sessions())
    assert_rpc_error(
        lambda: client.stub.CreateSession(pb.CreateSessionRequest(config=config), timeout=10.0),
        INVALID, field)
    assert len(client.list_sessions()) == before


def test_create_session_beyond_max_sessions():
    with running_server("--max_sessions=2") as server, \
            pitlane.Client(server.address, timeout_s=10.0) as client:
        first = client.create_session().session_id
        client.create_session()
        assert_rpc_error(client.create_session, grpc.StatusCode.RESOURCE_EXHAUSTED,
                         "max_sessions")
        assert len(client.list_sessions()) == 2
        client.delete_session(first)
        client.create_session()  # A slot is free again.


# --- SpawnVehicle ------------------------------------------------------------------


def _spec(**fields):
    """A valid default spec with `fields` (dotted paths) set."""
    spec = pitlane.vehicle_spec()
    for path, value in fields.items():
        *parents, leaf = path.split(".")
        message = spec
        for name in parents:
            message = getattr(message, name)
        if value is None:
            message.ClearField(leaf)
        else:
            setattr(message, leaf, value)
    return spec


SPEC_CASES = [
    # (dotted field path set on the spec, value); the error must name the path.
    ("model", None),  # Clears the oneof: no kinematic_bicycle.
    ("length_m", 0.0),
    ("length_m", -4.5),
    ("length_m", NAN),
    ("length_m", 100.5),
    ("width_m", INF),
    ("width_m", 0.0),
    ("kinematic_bicycle.wheelbase_m", 5.0),  # > length_m 4.5.
    ("kinematic_bicycle.wheelbase_m", 0.0),
    ("kinematic_bicycle.wheelbase_m", NAN),
    ("kinematic_bicycle.rear_overhang_m", -0.1),
    ("kinematic_bicycle.rear_overhang_m", 2.0),  # > 4.5 - 2.7.
    ("kinematic_bicycle.integrator", 99),
    ("initial_pose.x_m", NAN),
    ("initial_pose.y_m", -INF),
    ("initial_pose.yaw_rad", NAN),
    ("initial_pose.x_m", 2e7),  # Beyond 1e7 m.
    ("initial_speed_mps", 31.0),  # > max_speed_mps 30.
    ("initial_speed_mps", -5.5),  # < -max_reverse_speed_mps.
    ("initial_speed_mps", NAN),
    ("limits.max_steering_angle_rad", 0.0),
    ("limits.max_steering_angle_rad", 2.0),
    ("limits.max_steering_angle_rad", NAN),
    ("limits.max_acceleration_mps2", 0.0),
    ("limits.max_braking_mps2", -1.0),
    ("limits.max_speed_mps", INF),
    ("limits.max_reverse_speed_mps", -1.0),
    ("limits.max_speed_mps", 1001.0),  # Above the 1000 m/s cap.
    ("limits.max_acceleration_mps2", 1e6),
    ("limits.max_steering_rate_radps", 0.0),
    ("limits.max_steering_rate_radps", INF),
    ("range_scan.beam_count", 0),
    ("range_scan.field_of_view_rad", 7.0),
    ("nearest_objects.count", 300),
    ("nearest_objects.radius_m", -1.0),
    ("name", "x" * 129),  # Over 128 bytes.
]


@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("path, value", SPEC_CASES,
                         ids=[f"{p}={v!r}"[:40] for p, v in SPEC_CASES])
def test_spawn_invalid_spec_spawns_nothing(client, session_id, index, path, value):
    specs = [_spec(), _spec(**{"initial_pose.x_m": 20.0})]
    if path == "model":
        specs[index] = _spec(kinematic_bicycle=None)
    else:
        specs[index] = _spec(**{path: value})
    assert_rpc_error(lambda: client.spawn_vehicles(session_id, specs), INVALID,
                     f"vehicles[{index}].{path}")
    assert client.get_session(session_id).vehicle_count == 0
    assert client.spawn_vehicle(session_id) == 1  # No id was used up.


def test_spawn_empty_list(client, session_id):
    assert_rpc_error(lambda: client.spawn_vehicles(session_id, []), INVALID, "vehicles")


def test_spawn_beyond_max_vehicles_spawns_nothing(client, new_session):
    sid = new_session(max_vehicles=3)
    assert client.spawn_vehicles(sid, [_spec()] * 2) == [1, 2]
    assert_rpc_error(lambda: client.spawn_vehicles(sid, [_spec()] * 2),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, "vehicles")
    assert client.get_session(sid).vehicle_count == 2
    assert client.spawn_vehicle(sid) == 3


def test_remove_vehicle_twice(client, session_id):
    car = client.spawn_vehicle(session_id)
    client.remove_vehicle(session_id, car)
    assert_rpc_error(lambda: client.remove_vehicle(session_id, car), NOT_FOUND, "vehicle_id")
    assert_rpc_error(lambda: client.remove_vehicle(session_id, 99), NOT_FOUND, "vehicle_id")


# --- SetControls -------------------------------------------------------------------


def _control(vehicle_id, accel=0.0, steer=0.0):
    return pb.VehicleControl(vehicle_id=vehicle_id, acceleration_mps2=accel,
                             steering_angle_rad=steer)


@pytest.mark.parametrize(
    "controls, code, fields",
    [
        ([_control(1, accel=NAN)], INVALID, ["controls[0].acceleration_mps2"]),
        ([_control(1, accel=-INF)], INVALID, ["controls[0].acceleration_mps2"]),
        ([_control(1, steer=NAN)], INVALID, ["controls[0].steering_angle_rad"]),
        ([_control(1, steer=INF)], INVALID, ["controls[0].steering_angle_rad"]),
        ([_control(1, 1.0), _control(2, accel=INF)], INVALID,
         ["controls[1].acceleration_mps2"]),
        ([_control(99)], NOT_FOUND, ["controls[0].vehicle_id"]),
        ([_control(1, 1.0), _control(99)], NOT_FOUND, ["controls[1].vehicle_id"]),
        ([_control(1, 1.0), _control(3)], NOT_FOUND, ["controls[1].vehicle_id"]),  # Removed.
        ([_control(1, 1.0), _control(2), _control(1)], INVALID, ["controls[2].vehicle_id"]),
    ],
    ids=["nan_accel", "inf_accel", "nan_steer", "inf_steer", "second_bad", "unknown_id",
         "second_unknown", "removed_id", "duplicate_id"],
)
def test_set_controls_invalid_applies_nothing(client, session_id, controls, code, fields):
    assert client.spawn_vehicles(session_id, [_spec(), _spec(), _spec()]) == [1, 2, 3]
    client.remove_vehicle(session_id, 3)
    assert_rpc_error(lambda: client.set_controls(session_id, controls), code, *fields)
    for v in client.step(session_id, 5).vehicles:
        assert (v.speed_mps, v.acceleration_mps2, v.steering_angle_rad) == (0.0, 0.0, 0.0)


# --- Step and StreamStates ---------------------------------------------------------


@pytest.mark.parametrize(
    "ticks, expected_tick, code, field",
    [
        (0, None, INVALID, "ticks"),
        (MAX_TICKS_PER_STEP + 1, None, INVALID, "ticks"),
        (1, 3, grpc.StatusCode.ABORTED, "expected_tick"),
        (1, 1, grpc.StatusCode.ABORTED, "expected_tick"),
    ],
)
def test_step_invalid(client, session_id, ticks, expected_tick, code, field):
    client.step(session_id, 2, expected_tick=0)
    assert_rpc_error(lambda: client.step(session_id, ticks, expected_tick=expected_tick),
                     code, field)
    assert client.get_state(session_id).time.tick == 2
    assert client.step(session_id, MAX_TICKS_PER_STEP, expected_tick=2).time.tick == 1002


def test_stream_states_every_zero_ticks(client, session_id):
    assert_rpc_error(lambda: next(client.stream_states(session_id, 0, timeout_s=10.0)),
                     INVALID, "every_n_ticks")


# --- Afterwards --------------------------------------------------------------------


def test_server_alive_and_bystander_untouched(client, bystander):
    """Runs last in this module: nothing above touched the bystander."""
    sid, info, state = bystander
    assert client.get_session(sid) == info
    assert client.get_state(sid) == state
    assert sid in [s.session_id for s in client.list_sessions()]
    assert client.step(sid, 1).time.tick == state.time.tick + 1
