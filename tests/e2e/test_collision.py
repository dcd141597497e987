"""Collision, obstacles, contact events and sensors through the real server.

Scenes are built so that contact ticks follow in closed form. Default cars are
4.5 m x 1.8 m with the wheelbase (2.7 m) centred, so the body centre lies
1.35 m ahead of the rear-axle reference point the API reports.
"""

import math

import grpc
import pytest

import pitlane
from pitlane import pb

CENTER_OFFSET_M = 1.35
HALF_LENGTH_M = 2.25
HALF_WIDTH_M = 0.9


def car_at(center_x, center_y, yaw, speed, **fields):
    """A vehicle spec whose body centre is at (center_x, center_y)."""
    return pitlane.vehicle_spec(
        x_m=center_x - CENTER_OFFSET_M * math.cos(yaw),
        y_m=center_y - CENTER_OFFSET_M * math.sin(yaw),
        yaw_rad=yaw,
        speed_mps=speed,
        **fields,
    )


def by_id(state):
    return {v.vehicle_id: v for v in state.vehicles}


def phases(events):
    return [(e.tick, pb.ContactPhase.Name(e.phase)) for e in events]


def head_on(client, sid):
    """Cars whose centres are 20 m apart, closing at 5 m/s each: 0.2 m per
    50 Hz tick, touching once 20 - 0.2 t <= 4.5, first at t = 78 (0.1 m deep);
    under REPORT they separate once 0.2 t - 20 > 4.5, first at t = 123."""
    return client.spawn_vehicles(
        sid, [car_at(0.0, 0.0, 0.0, 5.0), car_at(20.0, 0.0, math.pi, 5.0)]
    )


def test_report_policy_reports_began_ongoing_ended(client, new_session):
    sid = new_session(collision_policy="report")
    a, b = head_on(client, sid)

    assert list(client.step_with_events(sid, 77).events) == []
    began = client.step_with_events(sid, 1)
    assert phases(began.events) == [(78, "CONTACT_PHASE_BEGAN")]
    contact = began.events[0].contact
    assert (contact.pair.vehicle_id, contact.pair.other_id) == (a, b)
    assert contact.pair.other_kind == pb.OBJECT_KIND_VEHICLE
    assert (contact.normal_x, contact.normal_y) == pytest.approx((1.0, 0.0), abs=1e-12)
    assert contact.depth_m == pytest.approx(0.1, abs=1e-9)
    assert len(began.state.contacts) == 1

    ongoing = client.step_with_events(sid, 10)
    assert phases(ongoing.events) == [(88, "CONTACT_PHASE_ONGOING")]
    assert ongoing.events[0].contact.began_tick == 78

    ended = client.step_with_events(sid, 100)
    assert phases(ended.events) == [(123, "CONTACT_PHASE_ENDED")]
    assert list(ended.state.contacts) == []
    # Both drove through: REPORT never halts anyone.
    for v in ended.state.vehicles:
        assert not v.crashed
        assert abs(v.speed_mps) == 5.0


def test_stop_policy_halts_and_marks_crashed(client, new_session):
    sid = new_session(collision_policy="stop")
    assert (
        client.get_session(sid).config.collision_policy == pb.COLLISION_POLICY_STOP
    )
    a, b = head_on(client, sid)
    bystander = client.spawn_vehicle(sid, y_m=30.0, speed_mps=5.0)

    response = client.step_with_events(sid, 78)
    assert phases(response.events) == [(78, "CONTACT_PHASE_BEGAN")]
    cars = by_id(response.state)
    assert cars[a].crashed and cars[b].crashed
    assert cars[a].speed_mps == 0.0 and cars[b].speed_mps == 0.0
    assert not cars[bystander].crashed

    # A crashed car accepts controls and ignores them.
    client.set_controls(sid, {a: (3.0, 0.5), b: (3.0, 0.0)})
    later = by_id(client.step(sid, 50))
    for vid in (a, b):
        assert (later[vid].x_m, later[vid].y_m, later[vid].yaw_rad) == (
            cars[vid].x_m,
            cars[vid].y_m,
            cars[vid].yaw_rad,
        )
        assert later[vid].speed_mps == 0.0 and later[vid].crashed
    assert later[bystander].x_m == pytest.approx(cars[bystander].x_m + 50 * 0.1, abs=1e-9)
    state = client.get_state(sid)
    assert [(c.pair.vehicle_id, c.began_tick) for c in state.contacts] == [(a, 78)]

    # Removing a crashed car ends its contact at the next tick.
    client.remove_vehicle(sid, b)
    assert phases(client.step_with_events(sid, 1).events) == [(129, "CONTACT_PHASE_ENDED")]


def test_obstacles_walls_and_descriptions(client, new_session):
    wall = pitlane.obstacle_spec(
        center_x_m=20.05, center_y_m=0.0, length_m=0.1, width_m=20.0, name="wall"
    )
    sid = new_session(
        collision_policy="stop", bounds=(-10.0, -25.0, 100.0, 25.0), obstacles=[wall]
    )
    info = client.get_session(sid)
    assert info.obstacle_count == 1
    assert [o.obstacle_id for o in info.obstacles] == [1]
    assert info.obstacles[0].spec.name == "wall"
    assert info.config.bounds.max_x_m == 100.0
    assert list(info.config.obstacles) == []  # Listed in info.obstacles instead.

    rock = client.add_obstacle(sid, center_x_m=0.0, center_y_m=-15.0, length_m=2.0, width_m=2.0)
    assert rock == 2
    assert client.get_session(sid).obstacle_count == 2

    # 10 m/s east: the front (2.25 + 0.2 t) reaches the wall's near face (x = 20)
    # at t = 88.75, so the contact begins at tick 89, 0.05 m deep.
    (car,) = client.spawn_vehicles(sid, [car_at(0.0, 0.0, 0.0, 10.0)])
    response = client.step_with_events(sid, 100)
    assert phases(response.events)[0] == (89, "CONTACT_PHASE_BEGAN")
    contact = response.events[0].contact
    assert contact.pair.other_kind == pb.OBJECT_KIND_OBSTACLE
    assert (contact.pair.vehicle_id, contact.pair.other_id) == (car, 1)
    assert contact.depth_m == pytest.approx(0.05, abs=1e-9)
    assert by_id(response.state)[car].crashed

    # A car parked against the south wall touches it (edges meeting count).
    (parked,) = client.spawn_vehicles(sid, [car_at(50.0, -25.0 + HALF_WIDTH_M, 0.0, 0.0)])
    response = client.step_with_events(sid, 1)
    assert [
        (e.contact.pair.vehicle_id, e.contact.pair.other_kind, e.contact.pair.other_id)
        for e in response.events
        if e.phase == pb.CONTACT_PHASE_BEGAN
    ] == [(parked, pb.OBJECT_KIND_WALL, pb.BOUNDARY_WALL_SOUTH)]

    client.remove_obstacle(sid, rock)
    with pytest.raises(grpc.RpcError) as err:
        client.remove_obstacle(sid, rock)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "obstacle_id" in err.value.details()


def test_range_scan_and_nearest_objects(client, new_session):
    sid = new_session(bounds=(-40.0, -30.0, 40.0, 30.0))
    client.add_obstacle(sid, center_x_m=10.5, center_y_m=0.0, length_m=1.0, width_m=4.0)
    (sensing, other) = client.spawn_vehicles(
        sid,
        [
            car_at(
                0.0,
                0.0,
                0.0,
                0.0,
                range_scan={"beam_count": 4, "max_range_m": 60.0},
                nearest_objects={"count": 5, "radius_m": 25.0},
            ),
            car_at(0.0, 12.0, math.pi / 2, 3.0),
        ],
    )
    me = by_id(client.get_state(sid))[sensing]
    scan = me.range_scan
    # Full circle of 4 beams: -pi (back), -pi/2 (right), 0 (ahead), pi/2 (left).
    assert scan.angle_min_rad == pytest.approx(-math.pi)
    assert scan.angle_increment_rad == pytest.approx(math.pi / 2)
    back, right, ahead, left = scan.ranges_m
    assert back == pytest.approx(40.0, abs=1e-9)  # West wall at x = -40.
    assert right == pytest.approx(30.0, abs=1e-9)  # South wall at y = -30.
    assert ahead == pytest.approx(10.0, abs=1e-9)  # Obstacle's near face at x = 10.
    assert left == pytest.approx(12.0 - HALF_LENGTH_M, abs=1e-9)  # The other car's tail.

    nearest = me.nearest_objects
    assert [(o.kind, o.id) for o in nearest] == [
        (pb.OBJECT_KIND_OBSTACLE, 1),
        (pb.OBJECT_KIND_VEHICLE, other),
    ]
    assert (nearest[0].x_m, nearest[0].y_m) == pytest.approx((10.5, 0.0), abs=1e-9)
    assert nearest[1].y_m == pytest.approx(12.0, abs=1e-9)
    assert nearest[1].relative_yaw_rad == pytest.approx(math.pi / 2, abs=1e-12)
    assert nearest[1].speed_mps == 3.0
    # Vehicles without sensors carry none.
    assert not by_id(client.get_state(sid))[other].HasField("range_scan")


def test_decimated_stream_carries_events_of_skipped_ticks(client, new_session):
    sid = new_session()
    head_on(client, sid)
    stream = client.stream_states(sid, every_n_ticks=100, timeout_s=30.0)
    first = next(stream)
    assert first.state.time.tick == 0 and list(first.events) == []
    client.step(sid, 200)
    # Newest wins: the reader gets tick 100 unless its previous write was still being
    # finished when tick 100 was made, and then tick 200 with the events of both.
    message = next(stream)
    if message.state.time.tick == 100:
        assert phases(message.events) == [(78, "CONTACT_PHASE_BEGAN"),
                                          (100, "CONTACT_PHASE_ONGOING")]
        message = next(stream)
        assert phases(message.events) == [(123, "CONTACT_PHASE_ENDED")]
    else:
        assert message.skipped_frames == 1
        assert phases(message.events) == [(78, "CONTACT_PHASE_BEGAN"),
                                          (123, "CONTACT_PHASE_ENDED")]
    assert message.state.time.tick == 200
    assert message.dropped_events == 0
    stream.cancel()


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"center_x_m": math.nan}, "obstacles[0].center_x_m"),
        ({"length_m": 0.0}, "obstacles[0].length_m"),
        ({"width_m": math.inf}, "obstacles[0].width_m"),
        ({"yaw_rad": -math.inf}, "obstacles[0].yaw_rad"),
    ],
)
def test_bad_obstacles_are_rejected(client, session_id, fields, field):
    spec = {"center_x_m": 0.0, "center_y_m": 0.0, "length_m": 1.0, "width_m": 1.0}
    spec.update(fields)
    with pytest.raises(grpc.RpcError) as err:
        client.add_obstacle(session_id, **spec)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in err.value.details()
    assert client.get_session(session_id).obstacle_count == 0


def test_bad_bounds_and_policy(client):
    with pytest.raises(grpc.RpcError) as err:
        client.create_session(bounds=(0.0, 0.0, 0.0, 1.0))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "config.bounds.max_x_m" in err.value.details()
    with pytest.raises(ValueError):
        client.create_session(collision_policy="bounce")
