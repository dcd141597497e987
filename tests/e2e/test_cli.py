"""The `pitlane` command line (client/cpp/cli.cc, on the C++ client pitlane::client) against
the real server (issue 16): health, ls, create, spawn, step, watch, drive (the Drive helper),
reset, rm, token minting, and its exit codes."""

import os
import pathlib
import subprocess

import pytest

from conftest import SERVER, running_token_server

CLI = pathlib.Path(os.environ.get("PITLANE_CLI", SERVER.parent / "pitlane"))


def cli(address, *args, token_file=None):
    flags = [f"--address={address}"]
    if token_file is not None:
        flags.append(f"--token_file={token_file}")
    return subprocess.run([str(CLI), *flags, *args], capture_output=True, text=True,
                          timeout=60, check=False)


def ok(address, *args, **kwargs):
    done = cli(address, *args, **kwargs)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1]


def test_a_session_from_the_command_line(address):
    assert ok(address, "health") == ["SERVING"]
    sid = ok(address, "create", "--name=cli", "--clock=lockstep")[0]
    assert ok(address, "spawn", sid, "--count=2", "--speed=3") == ["1", "2"]
    assert ok(address, "step", sid, "--ticks=50") == ["50"]
    listed = ok(address, "ls")
    assert listed[0].split() == ["SESSION", "NAME", "CLOCK", "TICK", "VEHICLES"]
    assert [sid, "cli", "lockstep", "50", "2"] in [line.split() for line in listed]
    watched = ok(address, "watch", sid, "--messages=1")
    assert watched[0].startswith("tick 50 ") and "2 vehicles" in watched[0]
    # Both cars drove 3 m/s for one second: x = 3 m.
    assert [line.split()[:5] for line in watched[2:4]] == [
        ["1", "3.000", "0.000", "0.000", "3.000"], ["2", "3.000", "6.000", "0.000", "3.000"]]
    assert ok(address, "reset", sid) == ["0"]
    assert ok(address, "rm", sid) == []
    gone = cli(address, "rm", sid)
    assert gone.returncode == 1 and f'NOT_FOUND: session_id: no session "{sid}"' in gone.stderr


def test_drive_holds_constant_controls_in_a_barrier_session(address):
    sid = ok(address, "create", "--clock=barrier")[0]
    car = ok(address, "spawn", sid)[0]
    tick, speed = ok(address, "drive", sid, f"--vehicle={car}", "--ticks=50", "--accel=2")[0].split()
    # 2 m/s² for 50 ticks of 0.02 s.
    assert int(tick) == 50 and float(speed) == pytest.approx(2.0, abs=1e-9)
    ok(address, "rm", sid)


@pytest.mark.parametrize("args, message", [
    ((), "name a command"),
    (("fly",), 'unknown command "fly"'),
    (("step",), "step: name one SESSION"),
    (("ls", "extra"), "ls: takes no arguments"),
    (("create", "--clock=fast"), '--clock: lockstep, realtime or barrier, got "fast"'),
    (("token", "s-x", "--role=god"), '--role: owner, driver or viewer, got "god"'),
])
def test_a_bad_command_line_exits_2(address, args, message):
    done = cli(address, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_an_unreachable_server_exits_1():
    done = subprocess.run([str(CLI), "--address=127.0.0.1:1", "--timeout_s=2", "health"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1 and "UNAVAILABLE" in done.stderr


def test_tokens_from_the_command_line(tmp_path):
    with running_token_server(tmp_path) as (server, token, admin):
        refused = cli(server.address, "ls")
        assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
        created = ok(server.address, "create", "--clock=lockstep", token_file=admin)
        sid, owner_line = created
        assert owner_line.startswith("owner token: plt_")
        viewer, viewer_id = ok(server.address, "token", sid, "--role=viewer", token_file=admin)
        assert viewer.startswith("plt_") and viewer_id
        viewer_file = tmp_path / "viewer.token"
        viewer_file.write_text(viewer)
        # A viewer may watch, not step.
        assert ok(server.address, "watch", sid, "--messages=1", token_file=viewer_file)
        denied = cli(server.address, "step", sid, token_file=viewer_file)
        assert denied.returncode == 1 and "PERMISSION_DENIED" in denied.stderr
        assert token not in refused.stderr + denied.stderr


def test_a_race_and_its_results_from_the_command_line(address, client):
    sid = ok(address, "create", "--scenario=oval-race", "--clock=lockstep")[0]
    grid = ok(address, "race", sid, "--grid", "--laps=1", "--countdown_s=1", "--vehicles=2,1")
    assert grid[0] == "oval · 1 laps · countdown · race time -1.000 s"
    assert grid[1].split()[:4] == ["POS", "GRID", "CAR", "LAPS"]
    # Car 2 first on the grid, as named.
    assert grid[2].split()[:5] == ["1", "1", "pace", "2", "#2"]
    assert grid[3].split()[:5] == ["2", "2", "pace", "1", "#1"]
    again = cli(address, "race", sid)
    assert again.returncode == 1 and "FAILED_PRECONDITION" in again.stderr
    for _ in range(7):
        ok(address, "step", sid, "--ticks=1000")
    table = ok(address, "results", sid)
    assert table[0].startswith("oval · 1 laps · finished")
    assert all(line.split()[-1] == "finished" for line in table[2:])
    # The CSV and the JSON are the server's, byte for byte.
    assert "\n".join(ok(address, "results", sid, "--format=csv")) + "\n" == \
        client.race_results(sid, "csv").replace("\r\n", "\n")
    assert "\n".join(ok(address, "results", sid, "--format=json")) == \
        client.race_results(sid, "json")
    bad = cli(address, "results", sid, "--format=xml")
    assert bad.returncode == 2 and "--format: table, csv or json" in bad.stderr
    bad = cli(address, "race", sid, "--vehicles=1,x", "--replace")
    assert bad.returncode == 2 and "--vehicles" in bad.stderr
