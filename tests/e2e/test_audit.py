"""Audit lines through the real server binary (issue 12): one line at info per change a
client makes, naming the client's address, in text and JSON logs; none for reads, controls,
Steps or refused calls; and no way for a client to flood the log.
"""

import json
import re
import time

import grpc
import pitlane
import pytest

from conftest import assert_rpc_error, running_server

# "audit: peer=ipv4:127.0.0.1:51234 action=session.create session="s-..." name="demo" ..."
_AUDIT = re.compile(r'^audit: peer=(\S+) action=(\S+)((?: \w+="(?:[^"\\]|\\.)*")*)$')
_FIELD = re.compile(r' (\w+)="((?:[^"\\]|\\.)*)"')
_PEER = re.compile(r"^ipv4:127\.0\.0\.1:\d+$")
# The text format: "[2026-11-25 11:29:19.123] [pitlane] [info] <message>".
_TEXT_LINE = re.compile(r"^\[[^\]]+\] \[pitlane\] \[(\w+)\] (.*)$")


def _records(server, log_format):
    """(level, message) of every line the server wrote to stderr so far."""
    records = []
    for line in list(server.output):
        if not line.startswith("[stderr] "):
            continue
        line = line[len("[stderr] "):]
        if log_format == "json":
            record = json.loads(line)  # Every line is one JSON object.
            assert set(record) >= {"time", "level", "message"}, record
            records.append((record["level"], record["message"]))
        else:
            match = _TEXT_LINE.match(line)
            assert match, line
            records.append((match.group(1), match.group(2)))
    return records


def _audits(server, log_format):
    """The audit lines so far, as (peer, action, {field: value}) in the order written."""
    audits = []
    for level, message in _records(server, log_format):
        if not message.startswith("audit: peer="):
            continue
        assert level == "info", (level, message)
        match = _AUDIT.match(message)
        assert match, message
        audits.append((match.group(1), match.group(2), dict(_FIELD.findall(match.group(3)))))
    return audits


def _wait_for_audits(server, log_format, count, timeout_s=5.0):
    """Waits until `count` audit lines were written (they reach the pipe asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        audits = _audits(server, log_format)
        if len(audits) >= count:
            return audits
        time.sleep(0.02)
    return _audits(server, log_format)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_one_audit_line_per_change_and_none_for_anything_else(log_format):
    with running_server(f"--log_format={log_format}") as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            actions = []

            def expect(action, **fields):
                """A change was made: its line comes next, with these fields."""
                actions.append((action, {k: str(v) for k, v in fields.items()}))
                audits = _wait_for_audits(server, log_format, len(actions))
                assert len(audits) == len(actions), (audits, actions)
                peer, got_action, got_fields = audits[-1]
                assert _PEER.match(peer), peer
                assert got_action == action, (got_action, action)
                for key, value in actions[-1][1].items():
                    assert got_fields.get(key) == value, (action, key, got_fields)

            sid = client.create_session(name="audited").session_id
            expect("session.create", session=sid, name="audited", scenario="",
                   clock_mode="CLOCK_MODE_LOCKSTEP", tick_rate_hz=50, vehicles=0, open=1)
            car = client.spawn_vehicle(sid)
            expect("vehicles.spawn", session=sid, count=1, first_id=car, last_id=car)
            more = client.spawn_vehicles(sid, [pitlane.vehicle_spec(), pitlane.vehicle_spec()])
            expect("vehicles.spawn", session=sid, count=2, first_id=more[0], last_id=more[1])
            obstacle = client.add_obstacle(sid, center_x_m=20.0, center_y_m=0.0, length_m=2.0,
                                         width_m=2.0)
            expect("obstacles.add", session=sid, count=1, first_id=obstacle, last_id=obstacle)
            client.remove_obstacle(sid, obstacle)
            expect("obstacles.remove", session=sid, obstacle=obstacle)
            client.remove_vehicle(sid, more[1])
            expect("vehicles.remove", session=sid, vehicle=more[1])
            client.set_clock(sid, real_time_factor=2.0)
            expect("clock.set", session=sid, clock_mode="CLOCK_MODE_LOCKSTEP",
                   real_time_factor=2, paused="false", barrier_timeout_s=0.5)

            # Reads, controls and Steps are not changes worth a line (controls and Steps come
            # many times a second).
            client.set_controls(sid, {car: (1.0, 0.0)})
            client.step(sid, 3)
            client.get_state(sid)
            client.get_session(sid)
            client.list_sessions()

            with client.drive(sid, more[0], on_disconnect="hold") as driver:
                observation = driver.observe()
                expect("controller.attach", session=sid, vehicle=more[0],
                       on_disconnect="hold_controls")
                driver.send(observation.time.tick, acceleration_mps2=1.0)
                client.step(sid, 1)
                driver.observe()
            expect("controller.detach", session=sid, vehicle=more[0])

            client.reset_session(sid)
            expect("session.reset", session=sid, vehicles=0)

            # Refused changes change nothing and write nothing.
            assert_rpc_error(lambda: client.remove_vehicle(sid, 999), grpc.StatusCode.NOT_FOUND,
                             "vehicle_id")
            assert_rpc_error(lambda: client.create_session(tick_rate_hz=0.0),
                             grpc.StatusCode.INVALID_ARGUMENT, "config.tick_rate_hz")
            assert_rpc_error(lambda: client.set_clock(sid, real_time_factor=-1.0),
                             grpc.StatusCode.INVALID_ARGUMENT, "real_time_factor")
            assert_rpc_error(lambda: client.delete_session("s-nope"), grpc.StatusCode.NOT_FOUND,
                             "session_id")
            attach_refused = client.drive(sid, 999)
            with pytest.raises(grpc.RpcError):
                attach_refused.observe()
            attach_refused.close()

            client.delete_session(sid)
            expect("session.delete", session=sid, tick=0, open=0)
        time.sleep(0.2)  # Anything late would show now.
        assert [a for _, a, _ in _audits(server, log_format)] == [a for a, _ in actions]


def test_client_strings_in_audit_lines_are_cut_and_escaped():
    # Quotes, a backslash, a newline (which would forge a second line), control characters
    # and non-ASCII: written C-escaped, inside one JSON line.
    name = 'a "quoted" \\ name\nwith\ttabs \x01\x1b[31m caf\u00e9 \U0001F697'
    escaped = ('a \\"quoted\\" \\\\ name\\nwith\\ttabs \\x01\\x1b[31m caf\\xc3\\xa9 '
               '\\xf0\\x9f\\x9a\\x97')
    with running_server("--log_format=json") as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            sid = client.create_session(name=name).session_id
            long_sid = client.create_session(name="n" * 128).session_id
            audits = _wait_for_audits(server, "json", 2)
            client.delete_session(sid)
            client.delete_session(long_sid)
    assert audits[0][2]["name"] == escaped, audits[0]
    assert audits[1][2]["name"] == "n" * 64 + "...", audits[1]


def test_a_client_cannot_flood_the_log():
    with running_server() as server:
        with pitlane.Client(server.address, timeout_s=10.0) as client:
            time.sleep(0.2)
            before = len(_records(server, "text"))
            # Refused calls write nothing, however many and however large.
            huge = "x" * (1 << 20)
            for _ in range(100):
                for call in (lambda: client.get_session("s-nope"),
                             lambda: client.delete_session(huge),
                             lambda: client.create_session(name="n" * 200),
                             lambda: client.create_session(real_time_factor=1e-12)):
                    with pytest.raises(grpc.RpcError):
                        call()
            time.sleep(0.2)
            assert len(_records(server, "text")) == before, _records(server, "text")[before:]

            # Changes are audited through a rate limit: 100 lines a second, bursts of 200.
            start = time.monotonic()
            for _ in range(500):
                client.delete_session(client.create_session().session_id)
            elapsed_s = time.monotonic() - start
            time.sleep(0.3)
            records = _records(server, "text")[before:]
    audit_lines = [m for _, m in records if m.startswith("audit: peer=")]
    suppressed = [m for _, m in records if re.match(r"audit: \d+ lines suppressed", m)]
    allowed = 200 + 100 * (elapsed_s + 0.3) + 1
    assert len(audit_lines) <= allowed, (len(audit_lines), elapsed_s)
    assert len(audit_lines) < 1000  # Fewer lines than changes: some were held back...
    assert suppressed  # ...and the log says so.
    # Nothing else was written per call.
    assert len(records) == len(audit_lines) + len(suppressed), records


def test_tokens_minted_and_revoked_and_an_owners_detach_are_audited(tmp_path):
    from test_access import new_token
    admin_token = new_token()
    (tmp_path / "admin.token").write_text(admin_token)
    with running_server("--auth=token", f"--admin_token_file={tmp_path / 'admin.token'}") as server:
        with pitlane.Client(server.address, token=admin_token, timeout_s=10.0) as admin:
            sid = admin.create_session(name="class").session_id
            owner_token, owner_id = admin.owner_tokens[sid]
            car = admin.spawn_vehicle(sid)
            with pitlane.Client(server.address, token=owner_token, timeout_s=10.0) as owner:
                viewer, viewer_id = owner.mint_token(sid, "viewer")
                driver, driver_id = owner.mint_token(sid, "driver", car)
                owner.revoke_token(sid, viewer_id)
                with pitlane.Client(server.address, token=driver, timeout_s=10.0) as student:
                    stream = student.drive(sid, car)
                    stream.observe()
                    owner.detach_controller(sid, car)
                    with pytest.raises(grpc.RpcError):
                        while True:
                            stream.observe()
                    stream.close()
            admin.delete_session(sid)
        time.sleep(0.2)  # Anything late would show now.
        audits = _wait_for_audits(server, "text", 8)
    by_owner = f"owner {owner_id}"
    expected = [
        ("session.create", {"session": sid}),
        ("vehicles.spawn", {"session": sid}),
        ("token.mint", {"by": by_owner, "session": sid, "role": "viewer", "issued": viewer_id}),
        ("token.mint", {"by": by_owner, "session": sid, "role": "driver", "vehicle": str(car),
                        "issued": driver_id}),
        ("token.revoke", {"by": by_owner, "session": sid, "revoked": viewer_id}),
        ("controller.attach", {"by": f"driver {driver_id}", "session": sid,
                               "vehicle": str(car), "took_over": "false"}),
        # The owner's DetachController (the stream's end then detaches nothing, and says
        # nothing).
        ("controller.detach", {"by": by_owner, "session": sid, "vehicle": str(car)}),
        ("session.delete", {"session": sid}),
    ]
    assert [a for _, a, _ in audits] == [a for a, _ in expected], audits
    for (_, _, fields), (action, want) in zip(audits, expected):
        for key, value in want.items():
            assert fields.get(key) == value, (action, key, fields)
    log = "\n".join(server.output)
    for token in (admin_token, owner_token, viewer, driver):
        assert token not in log
