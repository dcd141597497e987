"""Every vehicle model spawned and driven through the real server.

Each model is checked against a closed form of its own physics over the wire
(docs/vehicle-models.md has the derivations), and the API's rules for models:
controls a model does not use are rejected, limits it does not use are
rejected, and a spawned vehicle's description lists its resolved parameters.
"""

import math

import grpc
import pytest

import pitlane
from conftest import assert_rpc_error
from pitlane import pb

RATE_HZ = 50.0
DT = 1.0 / RATE_HZ


def only_vehicle(state):
    assert len(state.vehicles) == 1
    return state.vehicles[0]


# --- physics_body (seed 000) ---------------------------------------------------


@pytest.mark.parametrize("rate_hz", [50.0, 100.0])
def test_physics_body_coasts_down_exponentially_at_any_tick_rate(client, new_session, rate_hz):
    """With no input the speed after t seconds is v0 * k^(50 t) at every rate."""
    sid = new_session(tick_rate_hz=rate_hz)
    client.spawn_vehicle(sid, model="physics_body", speed_mps=20.0,
                         params={"drag_factor_per_frame": 0.97})
    state = client.step(sid, int(2 * rate_hz))
    assert only_vehicle(state).speed_mps == pytest.approx(20.0 * 0.97 ** 100, rel=1e-12)


def test_physics_body_holds_a_target_speed_and_turns_instantly(client, new_session):
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model="physics_body",
                               limits={"max_acceleration_mps2": 50.0})
    client.set_controls(sid, [pitlane.control(car, target_speed_mps=8.0)])
    car_state = only_vehicle(client.step(sid, 100))
    assert car_state.speed_mps == pytest.approx(8.0, abs=1e-12)
    x0 = car_state.x_m
    # A quarter turn in one tick, then 1 s straight north at 8 m/s.
    client.set_controls(sid, [pitlane.control(car, target_speed_mps=8.0,
                                              yaw_rate_radps=math.pi / 2 * RATE_HZ)])
    car_state = only_vehicle(client.step(sid, 1))
    assert car_state.yaw_rad == pytest.approx(math.pi / 2, abs=1e-12)
    assert car_state.yaw_rate_radps == pytest.approx(math.pi / 2 * RATE_HZ)
    client.set_controls(sid, [pitlane.control(car, target_speed_mps=8.0)])
    after = only_vehicle(client.step(sid, 50))
    assert after.x_m == pytest.approx(x0 + 8.0 * DT, abs=1e-9)
    assert after.y_m - car_state.y_m == pytest.approx(8.0, abs=1e-9)
    assert after.steering_angle_rad == 0.0


def test_physics_body_description_lists_resolved_parameters(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid, model="physics_body")
    (info,) = client.get_session(sid).vehicles
    assert info.vehicle_id == car
    assert info.spec.WhichOneof("model") == "physics_body"
    assert info.spec.physics_body.drag_factor_per_frame == 0.98
    assert info.spec.limits.max_speed_mps == 30.0
    assert not info.spec.limits.HasField("max_steering_angle_rad")


# --- single_track (CommonRoad ST) -------------------------------------------------

BMW_WHEELBASE_M = 1.15620 + 1.42272


def test_single_track_circles_like_the_kinematic_bicycle_at_low_lateral_acceleration(
        client, new_session):
    """At 5 m/s and 0.05 rad (0.05 m/s² lateral) the presets are neutral-steer: the
    yaw rate is v tan(d) / l to within d²/2 relative."""
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model="single_track", speed_mps=5.0)
    client.set_controls(sid, {car: (0.0, 0.05)})
    car_state = only_vehicle(client.step(sid, 500))
    expected = 5.0 * math.tan(0.05) / BMW_WHEELBASE_M
    assert car_state.yaw_rate_radps == pytest.approx(expected, rel=0.05 ** 2 / 2)
    assert car_state.speed_mps == pytest.approx(5.0, abs=1e-12)
    assert car_state.steering_angle_rad == pytest.approx(0.05, abs=1e-15)
    assert abs(car_state.lateral_speed_mps) < 5.0 * 0.05


def test_single_track_presets_set_their_limits(client, new_session):
    sid = new_session()
    client.spawn_vehicles(sid, [
        pitlane.vehicle_spec(model="single_track", params={"preset": "SINGLE_TRACK_PRESET_FORD_ESCORT"}),
        pitlane.vehicle_spec(model="single_track", y_m=10.0,
                             limits={"max_steering_rate_radps": 2.0}),
    ])
    ford, bmw = client.get_session(sid).vehicles
    assert ford.spec.single_track.preset == pb.SINGLE_TRACK_PRESET_FORD_ESCORT
    assert ford.spec.single_track.mass_kg == pytest.approx(1225.89, abs=0.01)
    assert ford.spec.limits.max_steering_angle_rad == pytest.approx(0.910, abs=1e-3)
    assert ford.spec.limits.max_steering_rate_radps == pytest.approx(0.4)
    assert bmw.spec.single_track.preset == pb.SINGLE_TRACK_PRESET_BMW_320I
    assert bmw.spec.limits.max_steering_rate_radps == 2.0
    assert bmw.spec.limits.max_speed_mps == pytest.approx(50.8, abs=0.05)


def test_single_track_reverses_and_brakes_to_a_stop(client, new_session):
    sid = new_session(tick_rate_hz=100.0)
    car = client.spawn_vehicle(sid, model="single_track")
    client.set_controls(sid, {car: (-2.0, -0.5)})  # Reverse at full lock.
    state = only_vehicle(client.step(sid, 200))
    assert state.speed_mps == pytest.approx(-4.0, abs=1e-9)
    assert all(math.isfinite(v) for v in (state.x_m, state.y_m, state.yaw_rate_radps))
    client.set_controls(sid, {car: (0.0, 0.0)})
    assert only_vehicle(client.step(sid, 100)).speed_mps == pytest.approx(-4.0, abs=1e-9)


# --- front_wheel_drive / all_wheel_drive (seed 001) ------------------------------

G = 9.80665


@pytest.mark.parametrize("model,expected", [
    # Wet road (mu 0.5), 6 m/s² engine, no drag: front-wheel drive is held to the front
    # axle's grip mu g l_r / (L + mu h), all-wheel drive to mu g.
    ("front_wheel_drive", 0.5 * G * 1.62 / (2.7 + 0.5 * 0.55)),
    ("all_wheel_drive", 0.5 * G),
])
def test_axle_drive_acceleration_is_grip_limited(client, new_session, model, expected):
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model=model, params={
        "friction_coefficient": 0.5, "gas_to_acc_mps2": 6.0, "drag_coefficient_1ps": 0.0,
        "cg_to_front_axle_m": 1.08, "cg_height_m": 0.55, "wheelbase_m": 2.7})
    client.set_controls(sid, [pitlane.control(car, throttle=1.0)])
    state = only_vehicle(client.step(sid, 50))
    assert state.speed_mps == pytest.approx(expected * 1.0, rel=1e-12)
    assert state.acceleration_mps2 == pytest.approx(expected, rel=1e-9)


def test_front_wheel_drive_turns_at_v_sin_steer_over_l_and_brakes_to_zero(client, new_session):
    sid = new_session(tick_rate_hz=100.0)
    car = client.spawn_vehicle(sid, model="front_wheel_drive", speed_mps=10.0,
                               params={"drag_coefficient_1ps": 0.0})
    client.set_controls(sid, [pitlane.control(car, steering_angle_rad=0.2)])
    state = only_vehicle(client.step(sid, 10))
    # The seed's step turns by atan2(s sin d, L + s (cos d - 1)), s = v dt: within
    # s (1 - cos d) / L relative of v sin(d) / L.
    assert state.yaw_rate_radps == pytest.approx(10.0 * math.sin(0.2) / 2.7, rel=2e-3)
    client.set_controls(sid, [pitlane.control(car, brake=1.0)])
    state = only_vehicle(client.step(sid, 300))
    assert state.speed_mps == 0.0
    x = state.x_m
    assert only_vehicle(client.step(sid, 50)).x_m == x


# --- force_based (seed 004) ------------------------------------------------------


def test_force_based_reaches_the_terminal_speed_and_accounts_energy(client, new_session):
    """Terminal speed: 8000 N = 1/2 Cd A rho v² + c_rr v with the defaults (Cd 0.35,
    A 2.2 m², rho 1.29, c_rr 10.5): 116.79 m/s (the original's double-counted drag
    gave 99.354). The time constant near it is m / (Cd A rho v + c_rr) = 9.5 s, so after
    120 s the speed is within 1e-4 relative."""
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model="force_based", limits={"max_speed_mps": 200.0})
    client.set_controls(sid, [pitlane.control(car, throttle=1.0)])
    for _ in range(6):
        state = only_vehicle(client.step(sid, 1000))
    k = 0.5 * 0.35 * 2.2 * 1.29
    terminal = (-10.5 + math.sqrt(10.5 ** 2 + 4 * k * 8000.0)) / (2 * k)
    assert terminal == pytest.approx(116.79, abs=0.01)
    assert state.speed_mps == pytest.approx(terminal, rel=1e-4)
    assert state.kinetic_energy_j == pytest.approx(0.5 * 1200.0 * state.speed_mps ** 2, rel=1e-12)
    # At terminal speed all the engine's power is dissipated.
    dissipated_before = state.dissipated_energy_j
    state = only_vehicle(client.step(sid, 50))
    assert state.dissipated_energy_j - dissipated_before == pytest.approx(
        8000.0 * terminal * 1.0, rel=1e-3)
    # Braking: to a stop, never backwards, and the energy goes to the brakes.
    client.set_controls(sid, [pitlane.control(car, brake=1.0)])
    state = only_vehicle(client.step(sid, 1000))
    assert state.speed_mps == 0.0
    assert state.kinetic_energy_j == 0.0
    assert only_vehicle(client.step(sid, 10)).x_m == state.x_m


def test_force_based_steering_fades_above_the_slip_threshold(client, new_session):
    """At 45 m/s the effective angle is 0.2 exp(3 (1 - 45/30)) = 0.0446 rad: yaw rate
    v sin(0.0446) / 2.7."""
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model="force_based", speed_mps=45.0, params={
        "drag_coefficient": 0.0, "rolling_resistance_nspm": 0.0})
    client.set_controls(sid, [pitlane.control(car, steering_angle_rad=0.2)])
    state = only_vehicle(client.step(sid, 1))
    effective = 0.2 * math.exp(3 * (1 - 45.0 / 30.0))
    assert state.yaw_rate_radps == pytest.approx(45.0 * math.sin(effective) / 2.7, rel=1e-9)


# --- four_wheel (seed 002) ---------------------------------------------------------


def test_four_wheel_rests_on_its_static_wheel_loads(client, new_session):
    """At rest the loads sum to m g and split by the CG position (1.2 m behind the front
    axle of L = 2.7 m): the front axle carries m g (L - 1.2) / L, left = right."""
    sid = new_session(tick_rate_hz=RATE_HZ)
    client.spawn_vehicle(sid, model="four_wheel")
    state = only_vehicle(client.step(sid, 100))
    fl, fr, rl, rr = state.wheel_loads_n
    weight = 1500.0 * G
    assert fl + fr + rl + rr == pytest.approx(weight, rel=1e-9)
    assert fl + fr == pytest.approx(weight * (2.7 - 1.2) / 2.7, rel=1e-9)
    assert fl == pytest.approx(fr, rel=1e-12)
    assert rl == pytest.approx(rr, rel=1e-12)
    assert (state.x_m, state.y_m, state.speed_mps) == (0.0, 0.0, 0.0)


def test_four_wheel_transfers_load_under_acceleration_and_turns(client, new_session):
    """Accelerating moves load to the rear axle (m a h / L); a left turn loads the right
    wheels; the yaw rate at low speed and small steer approaches v tan(d) / L."""
    sid = new_session(tick_rate_hz=RATE_HZ)
    car = client.spawn_vehicle(sid, model="four_wheel",
                               params={"front_wheel_drive": True, "rear_wheel_drive": True})
    client.set_controls(sid, {car: (2.0, 0.0)})
    state = only_vehicle(client.step(sid, 100))  # Pitch settled (1.5 Hz, damped).
    fl, fr, rl, rr = state.wheel_loads_n
    static_rear = 1500.0 * G * 1.2 / 2.7
    assert rl + rr - static_rear == pytest.approx(1500.0 * 2.0 * 0.55 / 2.7, rel=0.02)
    client.set_controls(sid, {car: (0.0, 0.05)})
    state = only_vehicle(client.step(sid, 100))
    fl, fr, rl, rr = state.wheel_loads_n
    assert fr > fl and rr > rl
    v = state.speed_mps
    assert state.yaw_rate_radps == pytest.approx(v * math.tan(0.05) / 2.7, rel=0.05)
    (info,) = client.get_session(sid).vehicles
    assert info.spec.four_wheel.rear_wheel_drive is True
    assert info.spec.four_wheel.mass_kg == 1500.0
    assert info.spec.limits.max_steering_angle_rad == pytest.approx(math.atan(2.7 / 4.5))


# --- rules shared by every model --------------------------------------------------

# (model, a control field the model does not use, its value)
UNUSED_CONTROLS = [
    ("kinematic_bicycle", "throttle", 0.5),
    ("kinematic_bicycle", "brake", 1.0),
    ("kinematic_bicycle", "yaw_rate_radps", 0.1),
    ("kinematic_bicycle", "target_speed_mps", 3.0),
    ("physics_body", "steering_angle_rad", 0.1),
    ("physics_body", "throttle", 0.1),
    ("single_track", "throttle", 0.3),
    ("single_track", "yaw_rate_radps", 0.3),
    ("front_wheel_drive", "acceleration_mps2", 1.0),
    ("all_wheel_drive", "target_speed_mps", 1.0),
    ("force_based", "acceleration_mps2", -1.0),
    ("four_wheel", "brake", 1.0),
]


@pytest.mark.parametrize("model,field,value", UNUSED_CONTROLS)
def test_controls_a_model_does_not_use_are_rejected(client, new_session, model, field, value):
    sid = new_session()
    car = client.spawn_vehicle(sid, model=model)
    before = client.get_state(sid)
    assert_rpc_error(lambda: client.set_controls(sid, [pitlane.control(car, **{field: value})]),
                     grpc.StatusCode.INVALID_ARGUMENT, f"controls[0].{field}", model)
    client.step(sid, 5)
    assert only_vehicle(client.get_state(sid)).x_m == only_vehicle(before).x_m


@pytest.mark.parametrize("field,value", [("throttle", 1.5), ("brake", -0.1)])
def test_pedals_outside_zero_one_are_rejected(client, new_session, field, value):
    sid = new_session()
    car = client.spawn_vehicle(sid, model="kinematic_bicycle")
    assert_rpc_error(lambda: client.set_controls(sid, [pitlane.control(car, **{field: value})]),
                     grpc.StatusCode.INVALID_ARGUMENT, f"controls[0].{field}", "[0, 1]")


def test_physics_body_target_and_acceleration_are_exclusive(client, new_session):
    sid = new_session()
    car = client.spawn_vehicle(sid, model="physics_body")
    assert_rpc_error(
        lambda: client.set_controls(
            sid, [pitlane.control(car, target_speed_mps=3.0, acceleration_mps2=1.0)]),
        grpc.StatusCode.INVALID_ARGUMENT, "acceleration_mps2", "target_speed_mps")


@pytest.mark.parametrize("model,limit", [
    ("physics_body", "max_steering_angle_rad"),
    ("physics_body", "max_steering_rate_radps"),
    ("front_wheel_drive", "max_acceleration_mps2"),
    ("all_wheel_drive", "max_reverse_speed_mps"),
    ("force_based", "max_braking_mps2"),
])
def test_limits_a_model_does_not_use_are_rejected(client, new_session, model, limit):
    sid = new_session()
    assert_rpc_error(lambda: client.spawn_vehicle(sid, model=model, limits={limit: 0.5}),
                     grpc.StatusCode.INVALID_ARGUMENT, f"limits.{limit}", "not used by", model)
    assert client.get_session(sid).vehicle_count == 0


@pytest.mark.parametrize("model,field,value", [
    ("physics_body", "drag_factor_per_frame", 0.0),
    ("physics_body", "drag_factor_per_frame", 1.5),
    ("single_track", "mass_kg", -1.0),
    ("single_track", "cg_to_rear_axle_m", 4.0),
    ("single_track", "friction_coefficient", float("nan")),
    ("front_wheel_drive", "wheelbase_m", 5.0),
    ("all_wheel_drive", "friction_coefficient", 0.0),
    ("force_based", "mass_kg", 0.0),
    ("force_based", "slip_threshold_mps", float("inf")),
    ("four_wheel", "mass_kg", -5.0),
    ("four_wheel", "lateral_friction_c2", 2.5),
    ("four_wheel", "front_wheel_drive", False),
])
def test_bad_model_parameters_name_their_field(client, new_session, model, field, value):
    sid = new_session()
    assert_rpc_error(lambda: client.spawn_vehicle(sid, model=model, params={field: value}),
                     grpc.StatusCode.INVALID_ARGUMENT, f"vehicles[0].{model}.{field}")


def test_python_client_rejects_bicycle_arguments_for_other_models():
    with pytest.raises(ValueError, match="kinematic_bicycle arguments"):
        pitlane.vehicle_spec(model="physics_body", wheelbase_m=2.0)
    with pytest.raises(ValueError, match="model must be one of"):
        pitlane.vehicle_spec(model="hovercraft")
