"""The classroom recipe end to end: classroom.py sets up a class on a --auth=token server from a
roster, and a team's controller drives with the file it was given (docs/security.md)."""

import json
import stat

import grpc
import pytest

import classroom
import controller
import pitlane
from conftest import running_server
from test_access import new_token


@pytest.fixture(scope="module")
def class_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("class")
    token = new_token()
    (d / "admin.token").write_text(token + "\n")
    with running_server("--auth=token", f"--admin_token_file={d / 'admin.token'}") as server:
        yield server, token, d


def test_a_session_per_team(class_server, tmp_path):
    server, admin_token, _ = class_server
    roster = tmp_path / "roster.txt"
    roster.write_text("# Monday group\nred\nblue  # late joiners\n\n")
    # A file left from an earlier run, readable by everyone, is made private again.
    (tmp_path / "teams").mkdir()
    (tmp_path / "teams" / "red.json").write_text("{}")
    (tmp_path / "teams" / "red.json").chmod(0o644)
    files = classroom.set_up(server.address, admin_token, classroom.read_roster(roster),
                             tmp_path / "teams")
    assert sorted(files) == ["blue", "red"]
    red = json.loads(files["red"].read_text())
    blue = json.loads(files["blue"].read_text())
    assert stat.S_IMODE(files["red"].stat().st_mode) == 0o600
    assert red["role"] == "owner" and red["session_id"] != blue["session_id"]
    # Red drives in its own session with its file; blue cannot see red's session.
    summary = controller.run(red["address"], "barrier", 1.0, session_id=red["session_id"],
                             token=red["token"], out=lambda line: None)
    assert summary["ticks"] == 50
    with pitlane.Client(server.address, token=blue["token"]) as blue_client:
        with pytest.raises(grpc.RpcError) as err:
            blue_client.get_session(red["session_id"])
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_race_with_a_car_per_team(class_server, tmp_path):
    server, admin_token, _ = class_server
    teams = ["red", "blue", "green"]
    files = classroom.set_up(server.address, admin_token, teams, tmp_path / "race", mode="race")
    red = controller.read_token_file(files["red"])
    blue = controller.read_token_file(files["blue"])
    assert red["role"] == "driver" and red["session_id"] == blue["session_id"]
    assert red["vehicle_id"] != blue["vehicle_id"]
    # The race runs in real time (the scenario's clock); red drives its own car for 0.5 s.
    summary = controller.run(red["address"], "realtime", 0.5, session_id=red["session_id"],
                             token=red["token"], vehicle_id=red["vehicle_id"],
                             out=lambda line: None)
    assert summary["ticks"] >= 25
    # Red's token cannot drive blue's car.
    with pitlane.Client(server.address, token=red["token"]) as red_client:
        with pytest.raises(grpc.RpcError) as err:
            red_client.set_controls(red["session_id"], {blue["vehicle_id"]: (1.0, 0.0)})
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    viewer = json.loads((tmp_path / "race" / "viewer.json").read_text())
    with pitlane.Client(server.address, token=viewer["token"]) as screen:
        names = {v.spec.name for v in screen.get_session(red["session_id"]).vehicles}
        assert set(teams) <= names


def test_a_bad_roster_names_the_line(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("red\nred team\n")
    with pytest.raises(ValueError, match=r"roster.txt:2: team names"):
        classroom.read_roster(roster)


def test_no_token_of_the_class_is_in_the_servers_log(class_server):
    server, admin_token, _ = class_server
    log = "\n".join(server.output)
    assert "plt_" not in log and admin_token not in log
