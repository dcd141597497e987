"""The command line, the busy port and the JSON log through the real binary (issue 12).

Exit codes: 2 for a bad command line, 1 when valid flags cannot start the server.
"""

import json
import subprocess

import grpc
import pitlane
import pytest

from conftest import SERVER, ServerProcess, assert_rpc_error, running_server

# A server that wrongly accepts its flags would listen until killed; the timeout catches it.
_RUN_TIMEOUT_S = 20.0


def _run(*args):
    """Runs the server binary with `args` to completion (without its HTTP endpoint unless
    `args` ask); returns the CompletedProcess."""
    http = [] if any(a.startswith("--http_listen") for a in args) else ["--http_listen="]
    return subprocess.run([str(SERVER), *http, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False)


@pytest.mark.parametrize(
    "flag, message",
    [
        # 4096 << 20 wrapped to 0 in an int, and the server refused every request.
        ("--max_receive_message_mib=4096", "--max_receive_message_mib: must be in [1, 1024]"),
        ("--max_sessions=0", "--max_sessions: must be in [1, 100000], got 0"),
        ("--max_vehicles_per_session=-3", "--max_vehicles_per_session: must be in [1, 1000000]"),
        ("--max_ticks_per_step=4294967296", "--max_ticks_per_step: must be in [1, 1000000]"),
        ("--worker_threads=100000", "--worker_threads: must be in [0, 256]"),
        # Unknown levels used to turn logging off without a word.
        ("--log_level=verbose", "--log_level: must be one of trace, debug, info"),
        ("--log_format=xml", "--log_format: must be text or json"),
        ("--session_idle_timeout=-1", "--session_idle_timeout: must be 0 (never) or in"),
        ("--session_idle_timeout=nan", "--session_idle_timeout: must be 0 (never) or in"),
        ("--listen=127.0.0.1", "--listen: must be host:port"),
        ("--min_barrier_timeout_s=0", "--min_barrier_timeout_s: must be in [0.001, 60] seconds"),
        ("--max_barrier_timeout_s=61", "--max_barrier_timeout_s: must be in [0.001, 60] seconds"),
        ("--max_barrier_timeout_s=nan", "--max_barrier_timeout_s: must be in [0.001, 60]"),
        # The floor above the default ceiling (60).
        ("--min_barrier_timeout_s=90", "--min_barrier_timeout_s: must be in [0.001, 60]"),
        # Refused by Abseil's parser; still exit 2, pointing at --help.
        ("--max_sessions=many", "max_sessions"),
        ("--no_such_flag=1", "no_such_flag"),
        ("stray", 'unexpected argument "stray"'),
    ],
)
def test_bad_flag_exits_2_naming_the_flag(flag, message):
    result = _run("--listen=127.0.0.1:0", flag)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert "listening" not in result.stdout


def test_a_barrier_timeout_floor_above_the_ceiling_exits_2():
    result = _run("--listen=127.0.0.1:0", "--min_barrier_timeout_s=5",
                  "--max_barrier_timeout_s=2")
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert ("--min_barrier_timeout_s: must be at most --max_barrier_timeout_s (2), got 5"
            in result.stderr), result.stderr


def test_every_barrier_timeout_stays_in_the_servers_range():
    with running_server("--min_barrier_timeout_s=0.1", "--max_barrier_timeout_s=2") as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            rule = ("barrier_timeout_s: must be in [0.1, 2] seconds (this server's "
                    "--min_barrier_timeout_s and --max_barrier_timeout_s), got ")
            for timeout_s in (0.05, 2.5, 60.0):
                assert_rpc_error(lambda: client.create_session(clock_mode="barrier",
                                                               barrier_timeout_s=timeout_s),
                                 grpc.StatusCode.INVALID_ARGUMENT, "config." + rule)
            assert client.list_sessions() == []  # Nothing was created.
            # Unset: the default, 0.5 s, is in the range.
            sid = client.create_session(clock_mode="barrier").session_id
            assert client.get_session(sid).config.barrier_timeout_s == 0.5
            for timeout_s in (0.05, 2.5):
                assert_rpc_error(lambda: client.set_clock(sid, barrier_timeout_s=timeout_s),
                                 grpc.StatusCode.INVALID_ARGUMENT, rule)
            assert client.get_session(sid).config.barrier_timeout_s == 0.5  # Unchanged.
            assert client.set_clock(sid, barrier_timeout_s=2.0).barrier_timeout_s == 2.0
            assert client.set_clock(sid, barrier_timeout_s=0.1).barrier_timeout_s == 0.1
    # A floor above the default: sessions that leave it unset get the floor.
    with running_server("--min_barrier_timeout_s=1", "--max_barrier_timeout_s=3") as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            sid = client.create_session(clock_mode="barrier").session_id
            assert client.get_session(sid).config.barrier_timeout_s == 1.0


def test_help_lists_our_flags_and_exits_0():
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "No flags matched" not in result.stdout
    for flag in ("listen", "max_sessions", "max_vehicles_per_session", "max_ticks_per_step",
                 "max_receive_message_mib", "log_level", "log_format", "worker_threads",
                 "session_idle_timeout", "min_barrier_timeout_s", "max_barrier_timeout_s",
                 "scenario", "scenario_dir"):
        assert f"--{flag} (default " in result.stdout, (flag, result.stdout)
    assert "1..1024" in result.stdout  # Ranges are part of the help.


def test_busy_port_is_an_error_and_the_first_server_still_serves():
    with running_server() as first:
        second = _run(f"--listen={first.address}")
        assert second.returncode == 1, (second.returncode, second.stdout, second.stderr)
        assert f'--listen: cannot listen on "{first.address}"' in second.stderr, second.stderr
        assert "listening" not in second.stdout
        # In JSON too, gRPC's own line saying why included: every line parses.
        second = _run(f"--listen={first.address}", "--log_format=json")
        assert second.returncode == 1, (second.returncode, second.stdout, second.stderr)
        messages = [json.loads(line)["message"] for line in second.stderr.splitlines()]
        assert f'--listen: cannot listen on "{first.address}"' in messages[-1], messages
        assert any("Address already in use" in m for m in messages), messages
        # Every new connection reaches the first server, which answers.
        for _ in range(5):
            with pitlane.Client(first.address, timeout_s=10.0) as client:
                sid = client.create_session(name="still-here").session_id
                client.delete_session(sid)


def test_json_log_lines_all_parse():
    # A session name with quotes, a backslash, a newline, control characters and non-ASCII:
    # the server's audit line of the creation names it (C-escaped, see test_audit.py).
    name = 'a "quoted" \\ name\nwith\ttabs \x01\x1b[31m caf\u00e9 \U0001F697'
    escaped = ('a \\"quoted\\" \\\\ name\\nwith\\ttabs \\x01\\x1b[31m caf\\xc3\\xa9 '
               '\\xf0\\x9f\\x9a\\x97')
    server = ServerProcess("--log_format=json", "--log_level=debug")
    try:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            sid = client.create_session(name=name).session_id
            client.delete_session(sid)
    finally:
        code = server.stop()
    assert code == 0, server.output
    lines = [line[len("[stderr] "):] for line in server.output if line.startswith("[stderr] ")]
    assert lines
    records = []
    for line in lines:
        record = json.loads(line)  # Raises on a line that is not one JSON object.
        assert set(record) >= {"time", "level", "message"}, record
        records.append(record)
    messages = [r["message"] for r in records]
    assert any(m.startswith("server started") for m in messages), messages
    assert any(f'name="{escaped}"' in m for m in messages), messages
    assert messages[-1] == "server stopped"


def test_environment_sets_the_flags_the_command_line_does_not():
    """PITLANE_<FLAG> for a container's configuration; the command line wins over it."""
    env = {"PITLANE_REPLICA": "r9", "PITLANE_MAX_SESSIONS": "3"}
    server = ServerProcess(env=env)
    try:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            ids = [client.create_session(name=f"e{i}").session_id for i in range(3)]
            assert all(sid.endswith(".r9") for sid in ids), ids
            assert_rpc_error(lambda: client.create_session(name="fourth"),
                             grpc.StatusCode.RESOURCE_EXHAUSTED, "--max_sessions")
    finally:
        assert server.stop() == 0
    server = ServerProcess("--replica=r8", env=env)
    try:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            assert client.create_session(name="e").session_id.endswith(".r8")
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("variable, value, message", [
    ("PITLANE_MAX_SESSIONS", "many", "PITLANE_MAX_SESSIONS (for --max_sessions)"),
    ("PITLANE_MAX_SESSIONS", "0", "--max_sessions: must be in [1, 100000], got 0"),
    ("PITLANE_REPLICA", "Room 1", "--replica: must be 1 to 32 characters"),
    ("PITLANE_AUTH", "maybe", "--auth"),
])
def test_a_bad_environment_value_exits_2_naming_it(variable, value, message):
    done = subprocess.run([str(SERVER), "--http_listen="], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False,
                          env={"PATH": "/usr/bin:/bin", variable: value})
    assert done.returncode == 2, done
    assert message in done.stderr


def test_healthcheck_asks_the_http_endpoint_whether_the_server_is_ready():
    with running_server("--http_listen=127.0.0.1:0") as server:
        http = server.http_address()
        done = _run("--healthcheck", f"--http_listen={http}")
        assert (done.returncode, done.stdout) == (0, "ready\n"), done
        # The same through the environment, as a container's HEALTHCHECK runs it.
        done = subprocess.run([str(SERVER), "--healthcheck"], capture_output=True, text=True,
                              timeout=_RUN_TIMEOUT_S, check=False,
                              env={"PITLANE_HTTP_LISTEN": http.replace("127.0.0.1", "0.0.0.0")})
        assert (done.returncode, done.stdout) == (0, "ready\n"), done
    done = _run("--healthcheck", f"--http_listen={http}")
    assert done.returncode == 1
    assert f"not ready: http://{http}/readyz: Connection refused" in done.stderr
    done = _run("--healthcheck")  # No HTTP endpoint: nothing to ask.
    assert done.returncode == 1 and "--http_listen: the health check asks" in done.stderr
