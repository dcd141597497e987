"""The command line, the busy port and the JSON log through the real binary (issue 12).

Exit codes: 2 for a bad command line, 1 when valid flags cannot start the server.
"""

import json
import subprocess

import pitlane
import pytest

from conftest import SERVER, ServerProcess, running_server

# A server that wrongly accepts its flags would listen until killed; the timeout catches it.
_RUN_TIMEOUT_S = 20.0


def _run(*args):
    """Runs the server binary with `args` to completion; returns the CompletedProcess."""
    return subprocess.run([str(SERVER), *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=_RUN_TIMEOUT_S, check=False)


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


def test_help_lists_our_flags_and_exits_0():
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "No flags matched" not in result.stdout
    for flag in ("listen", "max_sessions", "max_vehicles_per_session", "max_ticks_per_step",
                 "max_receive_message_mib", "log_level", "log_format", "worker_threads",
                 "session_idle_timeout", "scenario", "scenario_dir"):
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
    # the server logs it when the session is created.
    name = 'a "quoted" \\ name\nwith\ttabs \x01\x1b[31m caf\u00e9 \U0001F697'
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
    assert any(name in m for m in messages), messages  # The name survives escaping intact.
    assert messages[-1] == "server stopped"
