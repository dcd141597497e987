"""Budgets: what one client can make the server hold is bounded, through the real binary.

The server runs under a 4 GiB address-space limit (`ulimit -v 4194304`), as a classroom server
might: piles of vehicles and obstacles that once made millions of contacts per tick (and
killed the process) now keep a bounded, counted subset; a response larger than the server
sends is refused with a status that says how to ask for less; a deleted session's memory goes
back to the system.
"""

import time

import grpc
import pytest

import pitlane
from pitlane.v1 import simulator_pb2 as pb
from conftest import RawHttp2Client, ServerProcess, running_server

FOUR_GIB = 4194304 * 1024
BUDGET = 100_000  # --max_contacts_per_tick's default.


def pairs(n):
    return n * (n - 1) // 2


def proc_status_bytes(server, field):
    """A size from the server's /proc status: "VmRSS" (resident), "VmSize" (address space)."""
    with open(f"/proc/{server.proc.pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def rss_bytes(server):
    return proc_status_bytes(server, "VmRSS")


def spawn(client, sid, specs, chunk=2500):
    for start in range(0, len(specs), chunk):
        client.spawn_vehicles(sid, specs[start:start + chunk])


@pytest.fixture(scope="module")
def limited_server():
    with running_server("--max_vehicles_per_session=100000",
                        address_space_bytes=FOUR_GIB) as server:
        with pitlane.Client(server.address, timeout_s=60.0) as client:
            yield server, client


def test_5000_stacked_vehicles_in_a_realtime_session_keep_to_the_contact_budget(limited_server):
    server, client = limited_server
    sid = client.create_session(name="pile", clock_mode="realtime").session_id
    spawn(client, sid, [pitlane.vehicle_spec() for _ in range(5000)])
    time.sleep(3.0)  # The session ticks as fast as it can: each tick is 12.5 M pairs.
    state = client.get_state(sid)
    assert state.time.tick >= 1
    assert len(state.contacts) == BUDGET
    assert state.dropped_contacts == pairs(5000) - BUDGET
    # Everyone else is still served.
    other = client.create_session(name="other").session_id
    client.spawn_vehicles(other, [pitlane.vehicle_spec()])
    assert client.step(other, 5).time.tick == 5
    client.delete_session(other)
    client.delete_session(sid)
    assert server.proc.poll() is None


def test_a_lockstep_step_of_2000_stacked_vehicles_is_bounded(limited_server):
    server, client = limited_server
    sid = client.create_session(name="pile").session_id
    spawn(client, sid, [pitlane.vehicle_spec() for _ in range(2000)])
    response = client.step_with_events(sid, 3)
    assert len(response.state.contacts) == BUDGET
    assert response.state.dropped_contacts == pairs(2000) - BUDGET
    assert response.ticks_over_contact_budget == 3
    # BEGAN for the kept contacts of tick 1; the events are bounded too.
    assert len(response.events) + response.dropped_events >= BUDGET
    assert len(response.events) <= 100_000
    assert response.ByteSize() < 64 << 20
    client.delete_session(sid)
    assert server.proc.poll() is None


def test_vehicles_on_100000_obstacles_keep_to_the_budget_and_memory_comes_back(limited_server):
    server, client = limited_server
    baseline = rss_bytes(server)
    obstacle = pitlane.obstacle_spec(center_x_m=0.0, center_y_m=0.0, length_m=2.0, width_m=2.0)
    sid = client.create_session(name="pile").session_id
    for _ in range(10):
        client.add_obstacles(sid, [obstacle] * 10_000)
    spawn(client, sid, [pitlane.vehicle_spec() for _ in range(20)])
    state = client.step(sid, 2)
    assert len(state.contacts) == BUDGET
    assert state.dropped_contacts == 20 * 100_000 + pairs(20) - BUDGET
    peak = rss_bytes(server)
    client.delete_session(sid)
    # The allocator hands the session's pages back (it once kept 407 MB after the delete).
    deadline = time.monotonic() + 5.0
    while rss_bytes(server) > baseline + (64 << 20) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rss_bytes(server) <= baseline + (64 << 20), (baseline, peak, rss_bytes(server))
    assert server.proc.poll() is None


def test_a_response_bigger_than_the_server_sends_is_refused_with_advice():
    with running_server("--max_send_message_mib=1") as server:
        with pitlane.Client(server.address, timeout_s=30.0) as client:
            sid = client.create_session(name="wide").session_id
            # 50,000 cars on a 10 m grid: no contacts, several MB of state.
            spawn(client, sid, [pitlane.vehicle_spec(x_m=10.0 * (i % 250), y_m=10.0 * (i // 250))
                                for i in range(50_000)])
            described = {info.session_id: info for info in client.list_sessions()}[sid]
            assert described.vehicle_count == 50_000
            for call in (lambda: client.get_state(sid), lambda: client.get_session(sid)):
                with pytest.raises(grpc.RpcError) as info:
                    call()
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "ListSessions" in info.value.details()
            for call in (lambda: client.get_state(sid), lambda: client.step(sid, 1)):
                with pytest.raises(grpc.RpcError) as info:
                    call()
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert info.value.details().startswith("response: ")
                assert "--max_send_message_mib" in info.value.details()
            with pytest.raises(grpc.RpcError) as info:
                next(iter(client.stream_states(sid)))
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "vehicle_ids" in info.value.details()
            # Asking for less works.
            first = next(iter(client.stream_states(sid, vehicle_ids=[1, 2])))
            assert [v.vehicle_id for v in first.state.vehicles] == [1, 2]
            # The refusals changed nothing but the Step's tick, which was made.
            described = {info.session_id: info for info in client.list_sessions()}[sid]
            assert described.time.tick == 1
            client.delete_session(sid)


def test_clients_that_stop_reading_hold_at_most_four_large_responses(limited_server):
    # Four concurrent GetSession of a 200,000-obstacle session once held 37 MiB each while in
    # flight, and nothing bounded how many: a client that asks and never reads kept them all.
    server, client = limited_server
    sid = client.create_session(name="city").session_id
    for k in range(2):
        client.add_obstacles(sid, [pitlane.obstacle_spec(center_x_m=3.0 * (i % 1000),
                                                         center_y_m=3.0 * (i // 1000) + 300.0 * k,
                                                         length_m=1.0, width_m=1.0)
                                   for i in range(100_000)])
    small = client.create_session(name="small").session_id
    response_bytes = client.get_session(sid).ByteSize()
    assert response_bytes > 4 << 20  # A large read.
    time.sleep(0.2)  # The read above gives its place back once gRPC has freed its bytes.
    stalled = RawHttp2Client(server.address)
    try:
        for _ in range(16):
            stalled.call(b"/pitlane.v1.Simulator/GetSession", pb.GetSessionRequest(session_id=sid))
        # Each call is answered (a response begun, or refused) before another client reads.
        stalled.wait_answered(16)
        # Four responses are stuck in the server; a fifth large read is refused until they go.
        with pytest.raises(grpc.RpcError) as info:
            client.get_session(sid)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
        assert "large reads are being answered already" in info.value.details()
        # Of the stalled client's 16, four answers are held in the server (begun, never
        # finished) and twelve were refused at once: what it holds is four answers' worth.
        assert len(stalled.ended) == 12, (stalled.answered, stalled.ended)
        # Small reads are always answered.
        for _ in range(16):
            assert client.get_session(small).session_id == small
    finally:
        stalled.close()
    # The connection gone, its responses are freed and large reads answered again.
    deadline = time.monotonic() + 10.0
    while True:
        try:
            assert len(client.get_session(sid).obstacles) == 200_000
            break
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            assert time.monotonic() < deadline, "the budget was not given back"
            time.sleep(0.1)
    client.delete_session(sid)
    client.delete_session(small)
    assert server.proc.poll() is None


def test_running_out_of_memory_ends_one_call_with_a_clear_status():
    # An exception in a handler (std::bad_alloc) once reached the client as UNIMPLEMENTED with
    # an empty message. Here the server gets 256 MiB of address space beyond what it takes at
    # start, and one session grows until an allocation fails.
    # The probe with one malloc arena as the limited server has (each arena a thread opens
    # reserves 64 MiB of address space: how many it had opened would decide the headroom).
    probe = ServerProcess(env={"MALLOC_ARENA_MAX": "1"})
    try:
        limit = proc_status_bytes(probe, "VmSize") + (256 << 20)
    finally:
        assert probe.stop() == 0
    with running_server("--max_vehicles_per_session=1000000",
                        address_space_bytes=limit) as server:
        with pitlane.Client(server.address, timeout_s=60.0) as client:
            sid = client.create_session(name="grows").session_id
            refused = None
            for chunk in range(100):  # Up to 1,000,000 vehicles, 10 m apart: no contacts.
                specs = [pitlane.vehicle_spec(x_m=10.0 * (i % 100) + 1000.0 * (chunk % 10),
                                              y_m=10.0 * (i // 100) + 1000.0 * (chunk // 10))
                         for i in range(10_000)]
                try:
                    client.spawn_vehicles(sid, specs)
                except grpc.RpcError as error:
                    refused = error
                    break
            assert refused is not None, "the server never ran out of memory"
            assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.details()
            assert "memory" in refused.details(), refused.details()
            # The server goes on serving. With its address space full, gRPC itself may drop a
            # connection it cannot find memory for (the client sees UNAVAILABLE and connects
            # again): one call ends, never the process.
            def call(fn, *args):
                try:
                    return fn(*args)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
                    return fn(*args)

            assert sid in {s.session_id for s in call(client.list_sessions)}
            call(client.delete_session, sid)
            other = call(client.create_session).session_id
            call(client.spawn_vehicles, other, [pitlane.vehicle_spec()])
            assert call(client.step, other, 5).time.tick == 5
            call(client.delete_session, other)
        assert server.proc.poll() is None
