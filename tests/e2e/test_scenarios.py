"""Scenarios through the real server: the demo a newcomer starts with, loading shipped and
directory scenarios by name, errors that point at the line, reset and the state hash."""

import grpc
import pytest

import pitlane
import watch
from conftest import assert_rpc_error, running_server


def test_the_demo_runs_at_start_and_watch_shows_it_moving():
    with running_server("--scenario=demo") as server:
        demo = server.startup_session_id()
        printed = []
        state = watch.watch(server.address, rate_hz=20.0, messages=3, out=printed.append)
        assert len(state.vehicles) == 7
        assert all(v.speed_mps > 0.0 for v in state.vehicles)
        assert "four wheel" in printed[-1] and "speeder" in printed[-1]
        with pitlane.Client(server.address) as client:
            info = client.get_session(demo)
            assert info.config.clock_mode == pitlane.pb.CLOCK_MODE_REALTIME
            assert [t.name for t in info.config.tracks] == ["oval"]
            assert len(info.obstacles) == 5


def test_shipped_scenarios_load_by_name_with_overrides(client, new_session):
    sid = new_session(scenario="parking-lot", clock_mode="lockstep")
    info = client.get_session(sid)
    assert info.config.name == "parking-lot"
    assert [p.name for p in info.config.spawn_points] == [f"bay {i}" for i in range(1, 5)]
    assert info.vehicle_count == 1 and info.obstacle_count > 40
    patrol = info.vehicles[0].spec.driver.route_follower
    assert patrol.track == "aisles" and patrol.target_speed_mps == 4.0
    # A client car at a spawn point, among the AI's.
    bay = info.config.spawn_points[0].pose
    car = client.spawn_vehicle(sid, x_m=bay.x_m, y_m=bay.y_m, yaw_rad=bay.yaw_rad)
    assert car == 2
    assert_rpc_error(lambda: client.set_controls(sid, {1: (1.0, 0.0)}),
                     grpc.StatusCode.FAILED_PRECONDITION, "built-in driver")
    driver = client.drive(sid, 1)
    with pytest.raises(grpc.RpcError) as info:
        driver.observe()
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "built-in driver" in info.value.details()
    driver.close()


def test_reset_and_the_state_hash_reproduce_a_run(client, new_session):
    sid = new_session(scenario="demo", clock_mode="lockstep")
    client.spawn_vehicle(sid, x_m=0.0, y_m=50.0)  # Gone after the reset.
    client.step(sid, 500)
    first = client.state_hash(sid)
    state = client.reset_session(sid)
    assert state.time.tick == 0 and len(state.vehicles) == 7
    client.spawn_vehicle(sid, x_m=0.0, y_m=50.0)
    client.step(sid, 500)
    assert client.state_hash(sid) == first
    other = new_session(scenario="demo", clock_mode="lockstep")
    client.step(other, 499)
    assert client.state_hash(other) != first


@pytest.mark.parametrize("text,expected", [
    ('name: "x"\nvehicels { }\n', "bad.textproto:2:"),
    ('name: "x"\ntracks { name: "t" points { x_m: 0 } points { x_m: oops } }\n',
     "bad.textproto:2:"),
])
def test_a_malformed_scenario_file_names_its_line(tmp_path, text, expected):
    (tmp_path / "bad.textproto").write_text(text)
    (tmp_path / "badtrack.textproto").write_text(
        'name: "y"\nvehicles { kinematic_bicycle {} driver { route_follower { track: "nope" } } }\n')
    with running_server(f"--scenario_dir={tmp_path}") as server, \
            pitlane.Client(server.address) as client:
        assert_rpc_error(lambda: client.create_session(scenario="bad"),
                         grpc.StatusCode.INVALID_ARGUMENT, "config.scenario", expected)
        assert_rpc_error(lambda: client.create_session(scenario="badtrack"),
                         grpc.StatusCode.INVALID_ARGUMENT,
                         "config.vehicles[0].driver.route_follower.track", "nope")
        assert_rpc_error(lambda: client.create_session(scenario="missing"),
                         grpc.StatusCode.NOT_FOUND, "config.scenario", "demo")
