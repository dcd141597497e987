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
