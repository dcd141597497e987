"""Access control through the real server binary with --auth=token (docs/security.md).

Every RPC is called with ten kinds of token, each case on a fresh pair of sessions: A (the
target: two vehicles, an obstacle) and B (another team's). The table says what each must get;
a denied call must leave A and B as they were. Then the probes of issue 13, one test each:
what a second student could do to a first one's session on the landed server.
"""

import base64
import os
import re
import secrets
import subprocess
import sys

import grpc
import pytest

import pitlane
from pitlane.v1 import simulator_pb2 as pb
from conftest import running_server

OK = grpc.StatusCode.OK
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND = grpc.StatusCode.NOT_FOUND

KINDS = ["none", "malformed", "unknown", "revoked", "owner_of_other_session",
         "driver_of_other_vehicle", "viewer", "driver", "owner", "admin"]
QUOTA = 3


def new_token():
    """A token of the right form that the server never issued."""
    return "plt_" + base64.b32encode(secrets.token_bytes(20)).decode().lower()


@pytest.fixture(scope="module")
def admin_token():
    return new_token()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory, admin_token):
    token_file = tmp_path_factory.mktemp("auth") / "admin.token"
    token_file.write_text(admin_token + "\n")
    os.chmod(token_file, 0o600)
    # The most verbose log, as JSON: test_no_token_appears_in_the_logs reads all of it.
    with running_server("--auth=token", f"--admin_token_file={token_file}",
                        f"--max_sessions_per_client={QUOTA}", "--max_sessions=200",
                        "--log_level=trace", "--log_format=json") as server:
        yield server


@pytest.fixture(scope="module")
def admin(token_server, admin_token):
    with pitlane.Client(token_server.address, token=admin_token, timeout_s=10.0) as client:
        yield client


class World:
    """Sessions A and B and a token of each kind, made by the admin."""

    def __init__(self, admin):
        self.admin = admin
        self.a = admin.create_session(name="team-a").session_id
        self.b = admin.create_session(name="team-b").session_id
        (self.v1, self.driver, _), (self.v2, self.other_driver, self.v2_token_id) = (
            admin.spawn_vehicles_with_tokens(self.a, [pitlane.vehicle_spec(),
                                                      pitlane.vehicle_spec(y_m=10.0)]))
        self.obstacle = admin.add_obstacle(self.a, center_x_m=30.0, center_y_m=0.0, length_m=2.0,
                                         width_m=2.0)
        self.owner = admin.owner_tokens[self.a][0]
        self.owner_b = admin.owner_tokens[self.b][0]
        self.viewer, _ = admin.mint_token(self.a, "viewer")
        self.revoked, revoked_id = admin.mint_token(self.a, "viewer")
        admin.revoke_token(self.a, revoked_id)
        # A token an allowed RevokeToken revokes.
        self.victim, self.victim_id = admin.mint_token(self.a, "viewer")

    def token(self, kind):
        return {
            "none": None,
            "malformed": "not-a-token",
            "unknown": new_token(),
            "revoked": self.revoked,
            "owner_of_other_session": self.owner_b,
            "driver_of_other_vehicle": self.other_driver,
            "viewer": self.viewer,
            "driver": self.driver,
            "owner": self.owner,
            "admin": self.admin_token,
        }[kind]

    def snapshot(self):
        """What a denied call must not change."""
        sessions = sorted(s.session_id for s in self.admin.list_sessions())
        described = {sid: self.admin.get_session(sid) for sid in (self.a, self.b)
                     if sid in sessions}
        for info in described.values():
            info.ClearField("clock_stats")
        hashes = {sid: self.admin.state_hash(sid) for sid in described}
        return sessions, {k: v.SerializeToString() for k, v in described.items()}, hashes

    def cleanup(self):
        for sid in (self.a, self.b):
            try:
                self.admin.delete_session(sid)
            except grpc.RpcError:
                pass


def call_drive(client, w):
    stream = client.stub.Drive(iter([pb.DriveRequest(attach=pb.DriveAttach(
        session_id=w.a, vehicle_id=w.v1))]), timeout=10.0)
    next(stream)
    stream.cancel()


def call_stream_states(client, w):
    stream = client.stub.StreamStates(pb.StreamStatesRequest(session_id=w.a), timeout=10.0)
    next(stream)
    stream.cancel()


def call_detach(client, w):
    # The owner attaches a controller to v2 first; the call under test detaches it.
    with w.admin.with_token(w.owner) as owner:
        driver = owner.drive(w.a, w.v2)
        driver.observe()
        try:
            client.detach_controller(w.a, w.v2)
        except grpc.RpcError:
            # Denied: the controller is still attached (its car takes no SetControls).
            assert_code(grpc.StatusCode.FAILED_PRECONDITION, owner.set_controls, w.a,
                        {w.v2: (0.0, 0.0)})
            raise
        finally:
            driver.close()


# Each RPC, called on session A (vehicle v1) by `client`.
RPCS = {
    "CreateSession": lambda c, w: w.created.append(c.create_session(name="x").session_id),
    "GetSession": lambda c, w: c.get_session(w.a),
    "ListSessions": lambda c, w: c.list_sessions(),
    "DeleteSession": lambda c, w: c.delete_session(w.a),
    "ResetSession": lambda c, w: c.reset_session(w.a),
    "SpawnVehicle": lambda c, w: c.spawn_vehicle(w.a),
    "RemoveVehicle": lambda c, w: c.remove_vehicle(w.a, w.v1),
    "AddObstacle": lambda c, w: c.add_obstacle(w.a, center_x_m=-30.0, center_y_m=0.0,
                                               length_m=1.0, width_m=1.0),
    "RemoveObstacle": lambda c, w: c.remove_obstacle(w.a, w.obstacle),
    "SetControls": lambda c, w: c.set_controls(w.a, {w.v1: (1.0, 0.1)}),
    "Step": lambda c, w: c.step(w.a, 2),
    "Drive": call_drive,
    "SetClock": lambda c, w: c.set_clock(w.a, paused=True),
    "GetState": lambda c, w: c.get_state(w.a),
    "StreamStates": call_stream_states,
    "MintToken": lambda c, w: c.mint_token(w.a, "viewer"),
    "RevokeToken": lambda c, w: c.revoke_token(w.a, w.victim_id),
    "DetachController": call_detach,
}

READS = {"GetSession", "GetState", "StreamStates"}
DRIVES = {"SetControls", "Drive"}
ANY_TOKEN = {"ListSessions"}


def expected(rpc, kind):
    if kind in ("none", "malformed", "unknown", "revoked"):
        return UNAUTH
    if rpc == "CreateSession":  # An owner or admin token, of any session.
        return OK if kind in ("owner", "admin", "owner_of_other_session") else DENIED
    if kind in ("owner", "admin") or rpc in ANY_TOKEN:
        return OK
    if kind == "owner_of_other_session":
        return NOT_FOUND  # Exactly as for a session that does not exist.
    if rpc in READS:
        return OK
    if rpc in DRIVES and kind == "driver":
        return OK
    return DENIED


CASES = [(rpc, kind) for rpc in RPCS for kind in KINDS]


@pytest.mark.parametrize("rpc,kind", CASES, ids=[f"{r}-{k}" for r, k in CASES])
def test_every_rpc_with_every_kind_of_token(token_server, admin, admin_token, rpc, kind):
    w = World(admin)
    w.admin_token = admin_token
    w.created = []
    token = w.token(kind)
    before = w.snapshot()
    client = pitlane.Client(token_server.address, timeout_s=10.0,
                            token=token) if token else pitlane.Client(token_server.address,
                                                                      timeout_s=10.0)
    try:
        try:
            RPCS[rpc](client, w)
            code, details = OK, ""
        except grpc.RpcError as err:
            code, details = err.code(), err.details()
        want = expected(rpc, kind)
        assert code == want, f"{rpc} with {kind}: {code} {details!r}, expected {want}"
        if want == DENIED:
            assert "needs" in details, details  # Names the role needed.
        if want == NOT_FOUND:
            # Word for word what a session that does not exist gets (Drive prefixes "attach.").
            assert details.removeprefix("attach.") == f'session_id: no session "{w.a}"', details
        if want == UNAUTH:
            assert "authorization" in details, details
            if token:
                assert token not in details
        if code != OK:
            assert w.snapshot() == before, f"{rpc} with {kind} was denied but changed something"
            if rpc == "RevokeToken":  # The victim token still works.
                with admin.with_token(w.victim) as victim:
                    victim.get_session(w.a)
        elif rpc == "RevokeToken":
            with admin.with_token(w.victim) as victim, pytest.raises(grpc.RpcError) as err:
                victim.get_session(w.a)
            assert err.value.code() == UNAUTH
    finally:
        client.close()
        for sid in w.created:
            admin.delete_session(sid)
        w.cleanup()


def test_list_sessions_shows_only_what_the_caller_may_see(token_server, admin):
    w = World(admin)
    try:
        for token, visible in ((w.viewer, {w.a}), (w.driver, {w.a}), (w.owner_b, {w.b})):
            with admin.with_token(token) as client:
                assert {s.session_id for s in client.list_sessions()} == visible
        assert {w.a, w.b} <= {s.session_id for s in admin.list_sessions()}
    finally:
        w.cleanup()


def test_without_a_token_nothing_is_served(token_server):
    with pitlane.Client(token_server.address, timeout_s=10.0) as anonymous:
        with pytest.raises(grpc.RpcError) as err:
            anonymous.list_sessions()
        assert err.value.code() == UNAUTH
        assert "Bearer" in err.value.details()


# ---- The probes of issue 13: a student B against student A's session --------------------


@pytest.fixture
def two_students(token_server, admin):
    """A and B, each the owner of a session the admin made, with a car each."""
    sessions = []
    clients = []

    def student(name, **config):
        sid = admin.create_session(name=name, **config).session_id
        sessions.append(sid)
        client = admin.with_token(admin.owner_tokens[sid][0])
        clients.append(client)
        return sid, client

    yield student
    for client in clients:
        client.close()
    for sid in sessions:
        try:
            admin.delete_session(sid)
        except grpc.RpcError:
            pass


def assert_code(code, call, *args, **kwargs):
    with pytest.raises(grpc.RpcError) as err:
        call(*args, **kwargs)
    assert err.value.code() == code, err.value.details()
    return err.value.details()


def test_b_cannot_list_a_s_session_or_car(two_students):
    a_sid, a = two_students("a")
    a.spawn_vehicle(a_sid)
    _, b = two_students("b")
    assert a_sid not in {s.session_id for s in b.list_sessions()}
    assert_code(NOT_FOUND, b.get_session, a_sid)
    assert_code(NOT_FOUND, b.get_state, a_sid)


def test_b_cannot_pause_speed_up_reset_or_delete_a_s_race(two_students):
    a_sid, a = two_students("a", clock_mode="realtime")
    _, b = two_students("b")
    for call in (lambda: b.set_clock(a_sid, paused=True),
                 lambda: b.set_clock(a_sid, real_time_factor=1000.0),
                 lambda: b.reset_session(a_sid),
                 lambda: b.delete_session(a_sid)):
        assert_code(NOT_FOUND, call)
    clock = a.get_session(a_sid).config
    assert clock.real_time_factor == 1.0 and not clock.paused
    a.get_state(a_sid)  # Still there.


def test_the_python_client_never_echoes_a_mistyped_token(token_server):
    # One character outside ASCII: gRPC would refuse to send the header and print its value.
    typo = new_token()[:-1] + "\u00e9"
    with pytest.raises(ValueError) as err:
        pitlane.Client(token_server.address, token=typo)
    assert typo[4:20] not in str(err.value)
    assert "token" in str(err.value)


def test_b_cannot_delete_the_scenario_session(tmp_path, admin_token):
    token_file = tmp_path / "admin.token"
    token_file.write_text(admin_token)
    with running_server("--auth=token", f"--admin_token_file={token_file}",
                        "--scenario=demo") as server:
        demo = server.startup_session_id()
        with pitlane.Client(server.address, token=admin_token) as admin:
            sid = admin.create_session(name="b").session_id
            with admin.with_token(admin.owner_tokens[sid][0]) as b:
                assert_code(NOT_FOUND, b.delete_session, demo)
            admin.get_session(demo)


def test_b_cannot_step_a_s_lockstep_session(two_students):
    a_sid, a = two_students("a")
    _, b = two_students("b")
    assert_code(NOT_FOUND, b.step, a_sid, 10)
    assert a.get_state(a_sid).time.tick == 0


def test_b_cannot_remove_a_s_car(two_students):
    a_sid, a = two_students("a")
    car = a.spawn_vehicle(a_sid)
    driver = a.drive(a_sid, car)
    driver.observe()
    _, b = two_students("b")
    assert_code(NOT_FOUND, b.remove_vehicle, a_sid, car)
    a.step(a_sid, 1)
    assert driver.observe().vehicle.vehicle_id == car  # A's stream goes on.
    driver.close()


def test_b_cannot_spawn_a_car_in_front_of_a_under_stop(two_students):
    a_sid, a = two_students("a", collision_policy="stop")
    car = a.spawn_vehicle(a_sid, speed_mps=5.0)
    _, b = two_students("b")
    assert_code(NOT_FOUND, b.spawn_vehicle, a_sid, x_m=2.0)
    state = a.step(a_sid, 5)
    assert len(state.vehicles) == 1 and not state.contacts
    assert state.vehicles[0].vehicle_id == car


def test_nobody_else_takes_over_a_car_whose_controller_dropped(token_server, admin):
    sid = admin.create_session(name="race").session_id
    try:
        [(car, a_token, _)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
        [(_, b_token, _)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec(y_m=5.0)])
        with admin.with_token(a_token) as a, admin.with_token(b_token) as b:
            first = a.drive(sid, car)
            first.observe()
            first.close()  # A's connection drops.
            intruder = b.drive(sid, car)
            with pytest.raises(grpc.RpcError) as err:
                intruder.observe()
            assert err.value.code() == DENIED
            assert f"vehicle {car}'s driver" in err.value.details()
            intruder.close()
            # A re-attaches with its token.
            again = a.drive(sid, car)
            assert again.observe().vehicle.vehicle_id == car
            again.close()
    finally:
        admin.delete_session(sid)


_SILENT_DRIVER = """
import os, signal, sys
import pitlane
with pitlane.Client(sys.argv[1], token=os.environ["PITLANE_TOKEN"]) as client:
    stream = client.drive(sys.argv[2], int(sys.argv[3]))
    stream.observe()
    print("attached", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # Gone without a word, as a laptop whose lid shut.
"""


def test_a_driver_whose_connection_died_silently_takes_its_car_back(token_server, admin):
    sid = admin.create_session(name="race").session_id
    [(car, a_token, _)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
    child = subprocess.Popen(
        [sys.executable, "-c", _SILENT_DRIVER, token_server.address, sid, str(car)],
        env={**os.environ, "PITLANE_TOKEN": a_token, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "attached"
        # The stream is still open as far as the server knows: nobody else takes the car,
        # the admin included...
        other = admin.drive(sid, car)
        with pytest.raises(grpc.RpcError) as err:
            other.observe()
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        other.close()
        # ...but the same token takes it back at once.
        with admin.with_token(a_token) as a:
            again = a.drive(sid, car)
            assert again.observe().vehicle.vehicle_id == car
            admin.step(sid, 2)
            assert again.observe().vehicle.vehicle_id == car
            again.close()
    finally:
        child.kill()
        child.wait()
        admin.delete_session(sid)


def test_a_team_whose_program_restarted_still_owns_the_sessions_it_created(token_server, admin):
    home = admin.create_session(name="team-home").session_id
    other_home = admin.create_session(name="other-home").session_id
    try:
        team_token = admin.owner_tokens[home][0]
        with admin.with_token(team_token) as first_run:
            sandbox = first_run.create_session(name="sandbox").session_id
            first_run.spawn_vehicle(sandbox)
        # The program restarts with only the token it was given: the session it made before
        # is listed, readable and deletable, and its quota slot comes back.
        with admin.with_token(team_token) as second_run:
            assert {s.session_id for s in second_run.list_sessions()} == {home, sandbox}
            assert len(second_run.get_state(sandbox).vehicles) == 1
            viewer, _ = second_run.mint_token(sandbox, "viewer")
            second_run.delete_session(sandbox)
            again = second_run.create_session(name="sandbox").session_id
            # An owner token the team mints to share one session owns that one only.
            partner_token, _ = second_run.mint_token(again, "owner")
            with admin.with_token(partner_token) as partner:
                assert {s.session_id for s in partner.list_sessions()} == {again}
                assert_code(NOT_FOUND, partner.get_session, home)
                assert_code(NOT_FOUND, partner.mint_token, home, "owner")
                # Nor do the sessions it creates give it more (they count for the team).
                made = partner.create_session(name="partner").session_id
                made_token = partner.owner_tokens[made][0]
            with admin.with_token(made_token) as partner_again:
                assert {s.session_id for s in partner_again.list_sessions()} == {made}
            second_run.delete_session(made)  # The team's own token reaches it.
            # Another team sees none of it; a viewer of one session sees only that one.
            with admin.with_token(admin.owner_tokens[other_home][0]) as other:
                assert {s.session_id for s in other.list_sessions()} == {other_home}
                assert_code(NOT_FOUND, other.get_session, again)
                assert_code(NOT_FOUND, other.delete_session, again)
            second_run.delete_session(again)
        with admin.with_token(viewer) as spectator:
            assert_code(UNAUTH, spectator.get_session, sandbox)  # Revoked with its session.
    finally:
        admin.delete_session(home)
        admin.delete_session(other_home)


def test_b_cannot_exhaust_the_sessions(token_server, admin):
    home = admin.create_session(name="b-home").session_id
    created = []
    try:
        with admin.with_token(admin.owner_tokens[home][0]) as b:
            for _ in range(QUOTA):
                created.append(b.create_session(name="b").session_id)
            details = assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, b.create_session, name="b")
            assert "--max_sessions_per_client" in details
            # Tokens minted from B's carry B's quota: no way around it.
            another_owner, _ = b.mint_token(home, "owner")
            with admin.with_token(another_owner) as b_again:
                assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, b_again.create_session,
                            name="b")
            # And a viewer token B hands out creates nothing.
            viewer, _ = b.mint_token(home, "viewer")
            with admin.with_token(viewer) as spectator:
                assert_code(DENIED, spectator.create_session, name="b")
            # A is still served, and B's slot comes back when B deletes a session (the client
            # acts on the sessions it created with their owner tokens).
            created.append(admin.create_session(name="a").session_id)
            b.delete_session(created.pop(0))
            created.append(b.create_session(name="b").session_id)
    finally:
        for sid in created + [home]:
            try:
                admin.delete_session(sid)
            except grpc.RpcError:
                pass


def test_an_owner_detaches_a_controller_and_ends_a_barrier_stall(two_students):
    sid, owner = two_students("barrier", clock_mode="barrier", barrier_timeout_s=60.0)
    car = owner.spawn_vehicle(sid)
    stalled = owner.drive(sid, car)
    first = stalled.observe()
    owner.detach_controller(sid, car)
    with pytest.raises(grpc.RpcError) as err:
        while True:
            stalled.observe()
    assert err.value.code() == grpc.StatusCode.ABORTED
    stalled.close()
    assert first.time.tick == 0
    assert_code(grpc.StatusCode.FAILED_PRECONDITION, owner.detach_controller, sid, car)


def test_revoking_a_driver_token_ends_its_drive_stream(token_server, admin):
    sid = admin.create_session(name="race").session_id
    try:
        [(car, token, token_id)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
        with admin.with_token(token) as driver_client:
            driver = driver_client.drive(sid, car)
            driver.observe()
            admin.revoke_token(sid, token_id)
            with pytest.raises(grpc.RpcError) as err:
                while True:
                    driver.observe()
            assert err.value.code() == UNAUTH
            driver.close()
            assert_code(UNAUTH, driver_client.get_state, sid)
    finally:
        admin.delete_session(sid)


def test_a_revoked_viewer_gets_nothing_newer_than_the_frame_in_flight(token_server, admin):
    # A viewer that reads slowly: its first frame (larger than the 65,535 bytes of credit the
    # raw client gives) is still being written when its token is revoked; the newer frames
    # made meanwhile must not follow it.
    from conftest import RawHttp2Client
    sid = admin.create_session(name="watched").session_id
    try:
        admin.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0 * i, y_m=1.5, yaw_rad=0.1,
                                                        speed_mps=1.0) for i in range(5000)])
        viewer, viewer_id = admin.mint_token(sid, "viewer")
        client = RawHttp2Client(token_server.address)
        try:
            stream = client.call(b"/pitlane.v1.Simulator/StreamStates",
                                 pb.StreamStatesRequest(session_id=sid),
                                 ((b"authorization", b"Bearer " + viewer.encode()),))
            client.wait_for(lambda: len(client.data.get(stream, b"")) >= 60_000,
                            "the first frame's first bytes")
            admin.step(sid, 3)
            admin.revoke_token(sid, viewer_id)
            admin.step(sid, 3)
            client.grant(stream, 64 << 20)
            client.wait_for(lambda: stream in client.ended, "the stream's end")
            ticks = [m.state.time.tick for m in client.messages(stream, pb.StreamStatesResponse)]
            assert ticks == [0]
        finally:
            client.close()
        with admin.with_token(viewer) as revoked:
            assert_code(UNAUTH, revoked.get_state, sid)
    finally:
        admin.delete_session(sid)


def test_a_reset_revokes_the_driver_tokens_of_the_vehicles_it_removes(token_server, admin):
    sid = admin.create_session(name="reset").session_id
    try:
        [(car, token, _)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
        admin.reset_session(sid)
        assert admin.spawn_vehicle(sid) != car  # Ids are never reused.
        with admin.with_token(token) as old_driver:
            assert_code(UNAUTH, old_driver.get_state, sid)
    finally:
        admin.delete_session(sid)


def test_bad_mint_and_revoke_requests_name_the_field(token_server, admin):
    sid = admin.create_session(name="fields").session_id
    try:
        assert "role" in assert_code(grpc.StatusCode.INVALID_ARGUMENT, admin.stub.MintToken,
                                     pb.MintTokenRequest(session_id=sid))
        assert "vehicle_id" in assert_code(NOT_FOUND, admin.mint_token, sid, "driver", 99)
        assert "vehicle_id" in assert_code(grpc.StatusCode.INVALID_ARGUMENT, admin.mint_token,
                                           sid, "viewer", 3)
        assert "token_id" in assert_code(grpc.StatusCode.INVALID_ARGUMENT, admin.revoke_token,
                                         sid, "plt_secret")
        assert "token_id" in assert_code(NOT_FOUND, admin.revoke_token, sid,
                                         "tok_0123456789abcdef")
    finally:
        admin.delete_session(sid)


def test_a_generated_admin_token_is_printed_once_and_never_logged():
    import re
    import time
    with running_server("--auth=token") as server:
        deadline = time.monotonic() + 10.0
        printed = []
        while not printed and time.monotonic() < deadline:
            printed = [line for line in server.output if "Admin token (generated" in line]
            time.sleep(0.05)
        assert len(printed) == 1 and printed[0].startswith("[stdout]"), server.output
        token = re.search(r"(plt_[a-z2-7]{32})", printed[0]).group(1)
        with pitlane.Client(server.address, token=token) as admin:
            sid = admin.create_session(name="generated").session_id
            admin.delete_session(sid)
        assert sum(token in line for line in server.output) == 1


def test_a_drive_stream_opened_before_its_token_was_revoked_cannot_attach(token_server, admin):
    import queue as queue_module
    sid = admin.create_session(name="early").session_id
    try:
        [(car, token, token_id)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
        with admin.with_token(token) as driver_client:
            requests = queue_module.Queue()
            stream = driver_client.stub.Drive(iter(requests.get, None), timeout=10.0)
            admin.revoke_token(sid, token_id)  # Before the stream says which car.
            requests.put(pb.DriveRequest(attach=pb.DriveAttach(session_id=sid, vehicle_id=car)))
            with pytest.raises(grpc.RpcError) as err:
                next(stream)
            assert err.value.code() == UNAUTH
            requests.put(None)
        # Nobody holds the car: the owner attaches.
        owner = admin.drive(sid, car)
        owner.observe()
        owner.close()
    finally:
        admin.delete_session(sid)


def revoke_viewer(admin, sid):
    token, token_id = admin.mint_token(sid, "viewer")
    return token, lambda: admin.revoke_token(sid, token_id)


def remove_drivers_car(admin, sid):
    [(car, token, _)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
    return token, lambda: admin.remove_vehicle(sid, car)


@pytest.mark.parametrize("make", [revoke_viewer, remove_drivers_car],
                         ids=["revoked viewer token", "driver of a removed car"])
def test_a_revoked_token_ends_its_state_stream(token_server, admin, make):
    sid = admin.create_session(name="watched").session_id
    try:
        token, revoke = make(admin, sid)
        with admin.with_token(token) as watcher:
            stream = watcher.stub.StreamStates(pb.StreamStatesRequest(session_id=sid), timeout=10)
            next(stream)
            revoke()
            with pytest.raises(grpc.RpcError) as err:
                for _ in stream:
                    pass
            assert err.value.code() == UNAUTH
    finally:
        admin.delete_session(sid)


def test_the_admin_keeps_its_rights_when_a_team_revokes_the_owner_token_it_was_given(
        token_server, admin_token):
    with pitlane.Client(token_server.address, token=admin_token) as instructor:
        sid = instructor.create_session(name="team").session_id
        team_token, team_token_id = instructor.owner_tokens[sid]
        with instructor.with_token(team_token) as team:
            team.mint_token(sid, "owner")
            team.revoke_token(sid, team_token_id)  # The token the instructor's client kept.
        # The instructor's client falls back to the admin token, for calls and streams.
        assert instructor.get_session(sid).session_id == sid
        car = instructor.spawn_vehicle(sid)
        driver = instructor.drive(sid, car)
        driver.observe()
        driver.close()
        instructor.delete_session(sid)


def test_a_student_drives_in_a_session_it_created(token_server, admin):
    home = admin.create_session(name="home").session_id
    try:
        team_owner, _ = admin.mint_token(home, "owner")
        with admin.with_token(team_owner) as student:
            sid = student.create_session(name="sandbox").session_id
            car = student.spawn_vehicle(sid)
            driver = student.drive(sid, car)  # With the sandbox's owner token.
            assert driver.observe().vehicle.vehicle_id == car
            driver.close()
            student.delete_session(sid)
    finally:
        admin.delete_session(home)


def test_a_team_streams_and_drives_in_a_session_it_just_created(token_server, admin):
    home = admin.create_session(name="home").session_id
    try:
        team_owner, _ = admin.mint_token(home, "owner")
        with admin.with_token(team_owner) as team:
            sid = team.create_session(name="fresh").session_id
            stream = team.stream_states(sid)  # Before any other call on it.
            assert next(stream).state.time.tick == 0
            stream.cancel()
            team.delete_session(sid)
    finally:
        admin.delete_session(home)


def test_a_revoked_driver_lets_go_of_the_car_at_once(token_server, admin):
    sid = admin.create_session(name="letgo").session_id
    try:
        [(car, token, token_id)] = admin.spawn_vehicles_with_tokens(sid, [pitlane.vehicle_spec()])
        with admin.with_token(token) as driver_client:
            revoked = driver_client.drive(sid, car)
            revoked.observe()
            admin.revoke_token(sid, token_id)
            replacement = admin.drive(sid, car)  # Not ALREADY_EXISTS.
            assert replacement.observe().vehicle.vehicle_id == car
            replacement.close()
            revoked.close()
    finally:
        admin.delete_session(sid)


def test_each_token_an_admin_mints_has_its_own_quota(token_server, admin):
    race = admin.create_session(name="race").session_id
    created = []
    try:
        teams = [admin.mint_token(race, "owner")[0] for _ in range(2)]
        for token in teams:  # Team 1 filling its quota leaves team 2's alone.
            with admin.with_token(token) as team:
                for _ in range(QUOTA):
                    created.append(team.create_session(name="practice").session_id)
                assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, team.create_session, name="x")
    finally:
        for sid in created + [race]:
            admin.delete_session(sid)


def test_no_token_appears_in_the_logs(token_server, admin, admin_token):
    """Runs last in this module: every token the tests above used went through this server."""
    w = World(admin)
    w.cleanup()
    log = "\n".join(token_server.output)
    assert "plt_" not in log, "a token-like string is in the log"
    assert admin_token not in log
    # Changes name who made them by role and token id (never the token).
    assert re.search(r"session\.create.*admin tok_[0-9a-f]{16}", log), log[-2000:]
    assert re.search(r"token\.revoke.*(admin|owner) tok_[0-9a-f]{16}.*revoked.*tok_[0-9a-f]{16}", log)
