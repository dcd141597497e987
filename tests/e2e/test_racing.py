"""Track progress and track sensors through the real server (docs/racing.md).

The shipped oval-race scenario's track (651 m round) starts at (-100, -40) heading +x along
the bottom straight (y = -40), 10 m wide; its grid slots lie on that straight, 140 m past the
line.
"""

import contextlib
import time

import grpc
import pytest

import pitlane
from pitlane import pb


def by_id(state):
    return {v.vehicle_id: v for v in state.vehicles}


def test_every_car_is_timed_on_the_track_and_track_sensors_read_its_edges(client, new_session):
    sid = new_session(scenario="oval-race", clock_mode="lockstep")
    spec = pitlane.vehicle_spec(x_m=40.0, y_m=-42.5, name="student")
    spec.track_sensor.SetInParent()  # TORCS's 19 beams, 200 m.
    (me,) = client.spawn_vehicles(sid, [spec])
    state = by_id(client.get_state(sid))
    pace = [vid for vid in state if vid != me]
    assert len(pace) == 2

    mine = state[me]
    progress = mine.track_progress
    assert progress.track == "oval"
    assert progress.s_m == pytest.approx(140.0, abs=1e-9)
    assert progress.distance_m == pytest.approx(140.0, abs=1e-9)
    assert progress.lateral_m == pytest.approx(-2.5, abs=1e-9)  # Right of the line.
    assert progress.heading_rad == pytest.approx(0.0, abs=1e-12)
    assert progress.on_track
    assert progress.laps_completed == 0
    assert not progress.HasField("last_lap_s")

    sensor = mine.track_sensor
    assert len(sensor.edge_distances_m) == 19
    # Beam 0 points right (-90 degrees): the right edge at y = -45; the last left, y = -35.
    assert sensor.edge_distances_m[0] == pytest.approx(2.5, abs=1e-9)
    assert sensor.edge_distances_m[18] == pytest.approx(7.5, abs=1e-9)
    assert sensor.angle_rad == pytest.approx(0.0, abs=1e-12)
    assert sensor.track_position == pytest.approx(-0.5, abs=1e-12)
    # Cars without track sensors carry no reading, but are timed all the same.
    assert not state[pace[0]].HasField("track_sensor")
    assert state[pace[0]].track_progress.track == "oval"

    # 200 s: the pace cars (at most 12 m/s, slower in the bends) go at least twice over the
    # line of the 651 m oval; the first lap is timed from the spawn (one spawned in the lap's
    # second half counts from behind the line: its first lap is longer than the track).
    for _ in range(20):
        client.step(sid, ticks=500)
    after = by_id(client.get_state(sid))
    for vid in pace:
        p = after[vid].track_progress
        assert p.laps_completed >= 2, p
        assert 651.3 / 12.0 <= p.last_lap_s <= 80.0
        assert p.best_lap_s <= p.last_lap_s
        assert p.distance_m > 2 * 651.3
        assert p.on_track
    # The student's car stood still: its first lap has lasted since it was spawned.
    still = after[me].track_progress
    assert still.laps_completed == 0
    assert still.lap_time_s == pytest.approx(200.0, abs=1e-9)
    assert still.distance_m == pytest.approx(140.0, abs=1e-9)

    # The spec the session reports names the track and the sensors' resolved beams.
    described = {v.vehicle_id: v for v in client.get_session(sid).vehicles}
    assert described[me].spec.timing_track == "oval"
    assert len(described[me].spec.track_sensor.beam_angles_rad) == 19


def test_track_fields_are_checked_by_name_and_change_nothing(client, new_session):
    sid = new_session(scenario="oval-race", clock_mode="lockstep")
    before = len(client.get_state(sid).vehicles)

    unknown = pitlane.vehicle_spec(x_m=40.0, y_m=-42.5)
    unknown.timing_track = "nope"
    too_many = pitlane.vehicle_spec(x_m=40.0, y_m=-37.5)
    too_many.track_sensor.beam_angles_rad.extend([0.0] * 65)
    wide = pitlane.vehicle_spec(x_m=40.0, y_m=-37.5)
    wide.track_sensor.beam_angles_rad.extend([0.0, 4.0])
    far = pitlane.vehicle_spec(x_m=40.0, y_m=-37.5)
    far.track_sensor.range_m = 0.0
    cases = [
        (unknown, 'timing_track: no track "nope"'),
        (too_many, "track_sensor.beam_angles_rad: at most 64"),
        (wide, "track_sensor.beam_angles_rad[1]"),
        (far, "track_sensor.range_m"),
    ]
    for spec, field in cases:
        with pytest.raises(grpc.RpcError) as err:
            client.spawn_vehicles(sid, [pitlane.vehicle_spec(), spec])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert field in err.value.details(), err.value.details()
    assert len(client.get_state(sid).vehicles) == before

    # No track to time on, nothing for track sensors to read.
    plain = new_session()
    sensing = pitlane.vehicle_spec()
    sensing.track_sensor.SetInParent()
    with pytest.raises(grpc.RpcError) as err:
        client.spawn_vehicles(plain, [sensing])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "track_sensor: the vehicle is timed on no track" in err.value.details()
    (untimed,) = client.spawn_vehicles(plain, [pitlane.vehicle_spec()])
    assert not by_id(client.get_state(plain))[untimed].HasField("track_progress")


@pytest.mark.parametrize(
    "track, field",
    [
        (
            pb.Track(name="open", points=[pb.Point2D(x_m=0), pb.Point2D(x_m=100)],
                     sector_starts_m=[50.0]),
            "tracks[0].sector_starts_m: only a closed route",
        ),
        (
            pb.Track(name="square", closed=True, lane_width_m=4.0,
                     points=[pb.Point2D(x_m=0, y_m=0), pb.Point2D(x_m=100, y_m=0),
                             pb.Point2D(x_m=100, y_m=100), pb.Point2D(x_m=0, y_m=100)],
                     sector_starts_m=[200.0, 100.0]),
            "tracks[0].sector_starts_m[1]",
        ),
    ],
)
def test_sectors_are_checked_when_the_session_is_made(client, track, field):
    config = pb.SessionConfig(name="sectors", tracks=[track])
    with pytest.raises(grpc.RpcError) as err:
        client.stub.CreateSession(pb.CreateSessionRequest(config=config), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in err.value.details(), err.value.details()


def test_sectors_split_the_laps(client):
    square = pb.Track(name="square", closed=True, lane_width_m=6.0,
                      points=[pb.Point2D(x_m=0, y_m=0), pb.Point2D(x_m=100, y_m=0),
                              pb.Point2D(x_m=100, y_m=100), pb.Point2D(x_m=0, y_m=100)],
                      sector_starts_m=[100.0, 200.0, 300.0])
    config = pb.SessionConfig(name="sectors", tracks=[square])
    sid = client.stub.CreateSession(pb.CreateSessionRequest(config=config), timeout=10).session.session_id
    try:
        info = client.get_session(sid)
        assert list(info.config.tracks[0].sector_starts_m) == [100.0, 200.0, 300.0]
        # A car on the first side, 20 m past the line, going 10 m/s: the first sector ends
        # 8 s later (80 m), the second 10 s after that.
        (car,) = client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=20.0, speed_mps=10.0)])
        client.step(sid, ticks=50 * 9)
        p = by_id(client.get_state(sid))[car].track_progress
        assert p.sector == 1
        assert list(p.sector_times_s) == [pytest.approx(8.0, abs=0.02)]
        assert p.lap_time_s == pytest.approx(9.0, abs=1e-9)
    finally:
        with contextlib.suppress(grpc.RpcError):
            client.delete_session(sid)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):  # The most it has held.
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_many_big_closed_tracks_cost_bounded_time_and_memory():
    """Every closed track is a race track with a grid of its edges: what a small request can
    make the server build is bounded (docs/racing.md: the session's tracks share a budget of
    edge segments; a grid's memory follows its segments, not the area they span)."""
    from conftest import running_server

    def square(i, side):
        return pb.Track(name=f"square {i}", closed=True,
                        points=[pb.Point2D(x_m=0, y_m=0), pb.Point2D(x_m=side, y_m=0),
                                pb.Point2D(x_m=side, y_m=side), pb.Point2D(x_m=0, y_m=side)])

    with running_server() as server, pitlane.Client(server.address) as client:
        before = rss_bytes(server.proc.pid)
        for count, side in ((300, 4000.0), (10000, 4000.0)):
            config = pb.SessionConfig(name="squares", tracks=[square(i, side) for i in range(count)])
            started = time.monotonic()
            info = client.stub.CreateSession(pb.CreateSessionRequest(config=config), timeout=60)
            took = time.monotonic() - started
            sid = info.session.session_id
            assert took < 10.0, took
            # Timed on the first; the budget leaves the last 10,000th not raced, and says why.
            (car,) = client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0)])
            assert by_id(client.get_state(sid))[car].track_progress.track == "square 0"
            if count == 10000:
                late = pitlane.vehicle_spec(x_m=10.0)
                late.timing_track = "square 9999"
                with pytest.raises(grpc.RpcError) as err:
                    client.spawn_vehicles(sid, [late])
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "is not a race track: edges: " in err.value.details(), err.value.details()
            client.reset_session(sid)  # Shares the tracks: no second build.
            client.delete_session(sid)
        grown = rss_bytes(server.proc.pid) - before
        assert grown < 400 << 20, grown
