"""Recording (issue 17) end to end: a real server records sessions into MCAP files in its
--record_dir, read back by Foxglove's own reader (@mcap/core, tests/web/mcap_decode.mjs) through
the file's index with every CRC checked, every message decoded with its own schema (protobuf
with the file's FileDescriptorSet, JSON validated against @foxglove/schemas); the limits, the
errors, a server killed mid-recording."""

import json
import math
import os
import pathlib
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

import pitlane
from conftest import SERVER, ServerProcess, running_server, running_token_server
from foxglove_node import WEB_TESTS, node_path

CLI = pathlib.Path(os.environ.get("PITLANE_CLI", SERVER.parent / "pitlane"))


def decode(path, *keep, seek_ns=None):
    """The recording as @mcap/core reads and mcap_decode.mjs decodes it."""
    args = [node_path(), str(WEB_TESTS / "mcap_decode.mjs"), str(path)]
    args += [f"--keep={prefix}" for prefix in keep]
    if seek_ns is not None:
        args.append(f"--seek={seek_ns}")
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    assert read["ok"], read.get("error")
    return read


def read_stream(path):
    """The streaming reader alone, up to the first error (a file cut short)."""
    done = subprocess.run([node_path(), str(WEB_TESTS / "mcap_read.mjs"), "--stream", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def record_dir_flags(directory, *more):
    return (f"--record_dir={directory}", "--http_listen=", *more)


def test_records_demo_for_a_minute_with_a_client_driven_car(tmp_path):
    with running_server(*record_dir_flags(tmp_path)) as server:
        client = pitlane.Client(server.address)
        info = client.create_session(scenario="demo", clock_mode="lockstep")
        sid = info.session_id
        recording = client.start_recording(sid)
        assert recording.state == pitlane.pb.RECORDING_STATE_RECORDING
        assert recording.replayable_from_start
        assert recording.options.telemetry_rate_hz == 10.0
        car = client.spawn_vehicles(sid, [pitlane.vehicle_spec(name="student", x_m=0.0, y_m=-8.0)])[0]
        # 60 s of simulated time: 600 Steps of 5 ticks, the car's controls changed before each.
        for i in range(600):
            client.set_controls(sid, [pitlane.control(
                car, acceleration_mps2=1.0 if i < 100 else -0.2,
                steering_angle_rad=0.1 * math.sin(i / 30.0))])
            client.step(sid, 5)
        final_hash = client.state_hash(sid)
        stopped = client.stop_recording(recording.recording_id)
        assert stopped.state == pitlane.pb.RECORDING_STATE_COMPLETE, stopped.end_reason
        assert stopped.end_reason == "stopped"
        assert stopped.ticks == 3000
        assert stopped.duration_s == pytest.approx(60.0)
        assert [r.recording_id for r in client.list_recordings()] == [recording.recording_id]
        # Stopping again returns it as it ended.
        assert client.stop_recording(recording.recording_id).bytes == stopped.bytes
        # Re-simulated from the file: the same state hash at every one of its 3,000 ticks.
        replay = client.replay_recording(recording.recording_id)
        assert replay.matched, (replay.divergence, replay.stopped_reason)
        assert replay.ticks_compared == 3000
        assert replay.commands_applied == 1 + 600  # The spawn and the controls (not the Steps).
        assert replay.session.time.tick == 3000
        assert replay.session.session_id != sid
        assert client.state_hash(replay.session.session_id) == final_hash
        # Fetched through the API and read into arrays by the Python client.
        fetched = tmp_path / "fetched.mcap"
        assert client.download_recording(recording.recording_id, str(fetched)) == stopped.bytes
        run = pitlane.read_recording(str(fetched))
        assert run.header.session_id == sid and not run.truncated
        assert len(run.commands) == 1201
        assert list(run.hashes["tick"]) == list(range(1, 3001))
        assert int(run.hashes["state_hash"][-1]) == final_hash
        assert sorted(run.vehicles) == list(range(1, 9))  # The scenario's 7 and the car.
        assert run.vehicles[car].name == "student"
        mine = run.states["vehicle_id"] == car
        assert mine.sum() == 600  # From its spawn at tick 0 on, at ticks 5, 10, ..., 3000.
        assert run.states["x_m"][mine].min() < run.states["x_m"][mine].max()  # It moved.
        assert run.end.reason == "stopped"

    path = tmp_path / f"{recording.recording_id}.mcap"
    assert path.stat().st_size == stopped.bytes
    assert path.read_bytes() == (tmp_path / "fetched.mcap").read_bytes()
    read = decode(path, "/pitlane/")
    assert read["data_section_crc_ok"]
    assert read["compressions"] == ["zstd"]
    assert read["statistics"]["message_count"] == str(stopped.messages)
    topics = read["topics"]
    for topic, entry in topics.items():
        assert entry["schema_errors"] == 0, (topic, entry["first_errors"])

    # Its own channels: the header, every command with its tick, every tick's hash, the end.
    header = topics["/pitlane/session"]["messages"][0]["value"]
    assert header["session_id"] == sid
    assert header["replayable_from_start"] is True
    assert header["config"]["name"] == "demo"
    assert len(header["config"]["vehicles"]) == 7  # The scenario's, in the file.
    assert header["telemetry_every_n_ticks"] == 5
    origin = int(header["time_origin_unix_ns"])
    commands = [m["value"] for m in topics["/pitlane/commands"]["messages"]]
    assert len(commands) == 1 + 600 + 600
    assert commands[0]["spawn"]["vehicles"][0]["name"] == "student"
    assert [c.get("tick") for c in commands if "set_controls" in c][:3] == [None, "5", "10"]
    assert sum(1 for c in commands if c.get("step") == 5) == 600
    hashes = topics["/pitlane/state_hash"]["messages"]
    assert [int(m["value"]["tick"]) for m in hashes] == list(range(1, 3001))
    assert int(hashes[-1]["value"]["state_hash"]) == final_hash
    # Message times: the start plus the simulated time (20 ms a tick), however fast it ran.
    assert [int(m["log_time"]) - origin for m in hashes[:3]] == [20_000_000, 40_000_000, 60_000_000]
    end = topics["/pitlane/end"]["messages"][0]["value"]
    assert end["reason"] == "stopped" and end["ticks"] == "3000"

    # Telemetry at 10 Hz (ticks 0, 5, ..., 3000) on /pitlane/states, each frame in the file or
    # counted in a gap (a writer that fell behind; none on a quiet machine); the live
    # endpoint's channels, same topics, at 2 Hz (ticks 0, 25, ..., 3000).
    assert header["foxglove_every_n_ticks"] == 25
    gaps = topics.get("/pitlane/gaps", {"messages": []})["messages"]
    lost_ticks = set()
    for gap in gaps:
        if gap["value"]["kind"] == "KIND_FRAMES":
            first, last = int(gap["value"].get("first_tick", 0)), int(gap["value"]["last_tick"])
            lost_ticks |= {t for t in range(first, last + 1) if t % 5 == 0}
    assert len(lost_ticks) == stopped.frames_lost and stopped.commands_lost == 0
    frames = 601 - len(lost_ticks)
    shown = sum(1 for t in range(0, 3001, 25) if t not in lost_ticks)
    assert topics["/pitlane/states"]["count"] == frames
    assert topics["/pitlane/states"]["schema"] == "pitlane.v1.RecordedStates"
    for kind in ("world_state", "scene", "contacts"):
        assert topics[f"/{sid}/{kind}"]["count"] == shown, kind
    assert topics[f"/{sid}/scene"]["schema"] == "foxglove.SceneUpdate"
    assert topics[f"/{sid}/world_state"]["schema"] == "pitlane.v1.WorldState"
    for vehicle in range(1, 9):
        assert topics[f"/{sid}/vehicle/{vehicle}"]["count"] == shown - (vehicle == car)
    assert topics[f"/{sid}/map"]["count"] >= 1
    last_state = topics[f"/{sid}/world_state"]["last"]["value"]
    assert last_state["time"]["tick"] == "3000"
    assert [v["vehicle_id"] for v in last_state["vehicles"]] == [str(i) for i in range(1, 9)]
    # The compact states are the full ones to the nearest millimetre, 1e-4 rad and mm/s.
    last_compact = topics["/pitlane/states"]["last"]["value"]
    assert last_compact["tick"] == "3000"
    assert [int(step) for step in last_compact["vehicle_id_steps"]] == [1] * 8
    for i, vehicle in enumerate(last_state["vehicles"]):
        assert int(last_compact["x_mm"][i]) == pytest.approx(vehicle.get("x_m", 0.0) * 1e3, abs=0.5)
        assert int(last_compact["y_mm"][i]) == pytest.approx(vehicle.get("y_m", 0.0) * 1e3, abs=0.5)
        assert int(last_compact["yaw_100urad"][i]) == pytest.approx(
            vehicle.get("yaw_rad", 0.0) * 1e4, abs=0.5)
        assert int(last_compact["speed_mmps"][i]) == pytest.approx(
            vehicle.get("speed_mps", 0.0) * 1e3, abs=0.5)
    bytes_per_vehicle_tick = stopped.bytes / (8 * 3000)
    print(f"demo, 60 s, 8 vehicles, telemetry 10 Hz: {stopped.bytes} bytes, "
          f"{bytes_per_vehicle_tick:.1f} bytes per vehicle-tick")


def test_recording_ends_with_its_limits_and_its_session(tmp_path):
    with running_server(*record_dir_flags(tmp_path, "--max_recording_s=300")) as server:
        client = pitlane.Client(server.address)
        sid = client.create_session(scenario="demo", clock_mode="lockstep").session_id
        # The duration: 20 s of simulated time (the server's bound is the default).
        assert client.start_recording(sid).options.max_duration_s == 300.0
        client.stop_recording(client.list_recordings()[0].recording_id)
        by_time = client.start_recording(sid, max_duration_s=20.0)
        client.step(sid, 500)
        # The size: 1 MiB, every tick's telemetry (on another session: one recording at a time
        # per session).
        sized = client.create_session(scenario="demo", clock_mode="lockstep").session_id
        by_size = client.start_recording(sized, max_bytes=1 << 20, telemetry_rate_hz=50.0)
        deadline = time.monotonic() + 60
        while any(r.state == pitlane.pb.RECORDING_STATE_RECORDING for r in client.list_recordings()):
            assert time.monotonic() < deadline, client.list_recordings()
            client.step(sid, 50)
            client.step(sized, 50)
        done = {r.recording_id: r for r in client.list_recordings()}
        assert done[by_time.recording_id].ticks == 1000
        assert "max_duration_s" in done[by_time.recording_id].end_reason
        assert done[by_size.recording_id].state == pitlane.pb.RECORDING_STATE_COMPLETE
        assert "max_bytes" in done[by_size.recording_id].end_reason
        # The file stays within the limit (the summary still to write is counted).
        assert (1 << 19) < done[by_size.recording_id].bytes <= (1 << 20) + 4096
        # The session deleted: its recording ends, complete.
        other = client.create_session(name="short-lived").session_id
        deleted = client.start_recording(other)
        client.step(other, 10)
        client.delete_session(other)
        deadline = time.monotonic() + 10
        while (info := {r.recording_id: r for r in client.list_recordings()}[deleted.recording_id]).state == pitlane.pb.RECORDING_STATE_RECORDING:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert info.state == pitlane.pb.RECORDING_STATE_COMPLETE
        assert info.end_reason == "the session was deleted"
        assert info.ticks == 10
    for recording in (by_time, by_size, deleted):
        read = decode(tmp_path / f"{recording.recording_id}.mcap")
        assert read["data_section_crc_ok"]
        assert read["topics"]["/pitlane/end"]["count"] == 1


def test_recording_errors_name_their_field(tmp_path):
    with running_server("--http_listen=") as server:
        client = pitlane.Client(server.address)
        sid = client.create_session().session_id
        with pytest.raises(grpc.RpcError) as off:
            client.start_recording(sid)
        assert off.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "--record_dir" in off.value.details()
    with running_server(*record_dir_flags(tmp_path, "--max_recordings=1")) as server:
        client = pitlane.Client(server.address)
        sid = client.create_session(tick_rate_hz=20).session_id
        for options, field in [
            (dict(telemetry_rate_hz=0.0), "options.telemetry_rate_hz"),
            (dict(telemetry_rate_hz=21.0), "options.telemetry_rate_hz"),
            (dict(telemetry_rate_hz=float("nan")), "options.telemetry_rate_hz"),
            (dict(max_bytes=1000), "options.max_bytes"),
            (dict(max_bytes=1 << 40), "options.max_bytes"),
            (dict(max_duration_s=-1.0), "options.max_duration_s"),
            (dict(max_duration_s=float("inf")), "options.max_duration_s"),
            (dict(foxglove_rate_hz=-1.0), "options.foxglove_rate_hz"),
            (dict(foxglove_rate_hz=float("nan")), "options.foxglove_rate_hz"),
            # Above the telemetry rate (10 Hz by default, or as asked).
            (dict(foxglove_rate_hz=11.0), "options.foxglove_rate_hz"),
            (dict(telemetry_rate_hz=4.0, foxglove_rate_hz=5.0), "options.foxglove_rate_hz"),
        ]:
            with pytest.raises(grpc.RpcError) as bad:
                client.start_recording(sid, **options)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT, options
            assert bad.value.details().startswith(field), bad.value.details()
        with pytest.raises(grpc.RpcError) as missing:
            client.start_recording("s-nosuchsession")
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        for recording_id, code in [("", grpc.StatusCode.INVALID_ARGUMENT),
                                   ("r-nosuchrecording", grpc.StatusCode.NOT_FOUND),
                                   ("x" * 100_000, grpc.StatusCode.NOT_FOUND)]:
            with pytest.raises(grpc.RpcError) as bad:
                client.stop_recording(recording_id)
            assert bad.value.code() == code
            assert bad.value.details().startswith("recording_id")
            assert len(bad.value.details()) < 200
        assert client.list_recordings() == []
        # Telemetry rates the decimation makes lower (20 Hz ticks, 1.7 asked: every 12th tick,
        # 1.67 Hz) or higher (1.3: every 15th, 1.33 Hz), the Foxglove rate unset: its default
        # is at most the telemetry's.
        for rate in (1.7, 1.3):
            asked = client.start_recording(sid, telemetry_rate_hz=rate)
            assert asked.options.foxglove_rate_hz <= 20.0 / round(20.0 / rate) + 1e-9
            client.stop_recording(asked.recording_id)
        client.step(sid, 3)
        first = client.start_recording(sid)
        assert not first.replayable_from_start  # Started at tick 3.
        with pytest.raises(grpc.RpcError) as running:
            client.replay_recording(first.recording_id)
        assert running.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "still running" in running.value.details()
        with pytest.raises(grpc.RpcError) as twice:
            client.start_recording(sid)
        assert twice.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert twice.value.details().startswith("session_id: the session is being recorded")
        other = client.create_session().session_id
        with pytest.raises(grpc.RpcError) as busy:
            client.start_recording(other)
        assert busy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--max_recordings" in busy.value.details()
        client.stop_recording(first.recording_id)
        with pytest.raises(grpc.RpcError) as not_replayable:
            client.replay_recording(first.recording_id)
        assert not_replayable.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "cannot be re-simulated" in not_replayable.value.details()
        client.stop_recording(client.start_recording(sid).recording_id)  # A slot again.
        # Deleting: not while running; then its file and its entry are gone.
        running_one = client.start_recording(sid)
        with pytest.raises(grpc.RpcError) as still:
            client.delete_recording(running_one.recording_id)
        assert still.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        done_one = client.stop_recording(running_one.recording_id)
        # A download resumes from an offset; past the file's end is refused, naming it.
        whole = (tmp_path / f"{running_one.recording_id}.mcap").read_bytes()
        resumed = b"".join(piece.data for piece in client.stub.DownloadRecording(
            pitlane.pb.DownloadRecordingRequest(recording_id=running_one.recording_id,
                                                offset=1000)))
        assert resumed == whole[1000:]
        with pytest.raises(grpc.RpcError) as past:
            list(client.stub.DownloadRecording(pitlane.pb.DownloadRecordingRequest(
                recording_id=running_one.recording_id, offset=len(whole) + 1)))
        assert past.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert past.value.details().startswith("offset: past the file's end")
        assert client.delete_recording(running_one.recording_id) == done_one.bytes
        assert not (tmp_path / f"{running_one.recording_id}.mcap").exists()
        for call in (client.delete_recording, client.replay_recording):
            with pytest.raises(grpc.RpcError) as gone:
                call(running_one.recording_id)
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as gone:
            client.download_recording(running_one.recording_id, str(tmp_path / "x"))
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            f"{r.recording_id}.mcap" for r in client.list_recordings())


@pytest.mark.parametrize("flag, message", [
    ("--record_dir=/nonexistent/recordings", "--record_dir"),
    ("--max_recording_s=0", "--max_recording_s"),
    ("--max_recording_mib=0", "--max_recording_mib"),
    ("--record_quota_mib=-1", "--record_quota_mib"),
    ("--max_recordings=100000", "--max_recordings"),
])
def test_bad_recording_flags_stop_the_server_with_a_message(flag, message):
    done = subprocess.run([str(SERVER), "--listen=127.0.0.1:0", "--http_listen=", flag],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_a_killed_server_leaves_a_file_readable_up_to_its_last_chunk(tmp_path):
    server = ServerProcess(*record_dir_flags(tmp_path))
    try:
        client = pitlane.Client(server.address)
        sid = client.create_session(scenario="demo", clock_mode="lockstep").session_id
        # 1 MiB files are written in chunks of 64 KiB.
        recording = client.start_recording(sid, max_bytes=1 << 20, telemetry_rate_hz=50.0)
        path = tmp_path / f"{recording.recording_id}.mcap"
        deadline = time.monotonic() + 30
        while path.stat().st_size < 200_000:
            assert time.monotonic() < deadline
            client.step(sid, 50)
    finally:
        server.proc.kill()
        server.proc.wait()
    read = read_stream(path)
    assert read["records"]["Header"] == 1
    assert read["records"]["Chunk"] >= 3
    assert len(read["messages"]) > 1000
    assert not read["done"]  # No footer: cut short, and read up to the cut.
    run = pitlane.read_recording(str(path))  # The Python client's reader too.
    assert run.truncated and len(run.hashes["tick"]) > 100 and run.end is None


def test_a_server_lists_the_recordings_an_earlier_one_left(tmp_path):
    (tmp_path / "admin").mkdir()
    with running_server(*record_dir_flags(tmp_path)) as server:
        client = pitlane.Client(server.address)
        sid = client.create_session(scenario="demo", clock_mode="lockstep").session_id
        # Chunks of 64 KiB (1/16 of max_bytes), several of them: everything at 50 Hz.
        recording = client.start_recording(sid, max_bytes=1 << 20, telemetry_rate_hz=50.0,
                                           foxglove_rate_hz=50.0)
        client.step(sid, 250)
        done = client.stop_recording(recording.recording_id)
    cut = tmp_path / ("r-" + "a" * 26 + ".mcap")  # A recording cut short (half of one).
    whole = (tmp_path / f"{done.recording_id}.mcap").read_bytes()
    cut.write_bytes(whole[:len(whole) // 2])
    junk = tmp_path / ("r-" + "b" * 26 + ".mcap")
    junk.write_bytes(b"not a recording")
    (tmp_path / "notes.mcap").write_bytes(b"not named as a recording: only counted")
    with running_token_server(tmp_path / "admin", *record_dir_flags(tmp_path)) as (
            server, admin, _):
        as_admin = pitlane.Client(server.address, token=admin)
        listed = {r.recording_id: r for r in as_admin.list_recordings()}
        assert set(listed) == {done.recording_id, cut.stem, junk.stem}
        again = listed[done.recording_id]
        assert again.state == pitlane.pb.RECORDING_STATE_COMPLETE
        assert again.end_reason == "stopped"  # As its file's end says.
        assert (again.session_id, again.ticks, again.bytes) == (sid, 250, done.bytes)
        assert again.replayable_from_start
        assert listed[cut.stem].state == pitlane.pb.RECORDING_STATE_FAILED
        assert "no summary" in listed[cut.stem].end_reason, listed[cut.stem].end_reason
        assert listed[junk.stem].state == pitlane.pb.RECORDING_STATE_FAILED
        assert listed[junk.stem].end_reason.startswith("cannot be read: ")
        # Re-simulated, fetched and deleted like any other; only the admin sees them (their
        # owners' tokens were those of the server before).
        replay = as_admin.replay_recording(done.recording_id)
        assert replay.matched and replay.ticks_compared == 250
        owner = pitlane.Client(server.address, token=as_admin.owner_tokens[
            as_admin.create_session(name="other").session_id][0])
        assert owner.list_recordings() == []
        fetched = tmp_path / "admin" / "again.mcap"
        assert as_admin.download_recording(done.recording_id, str(fetched)) == done.bytes
        for recording_id in (junk.stem, cut.stem):
            as_admin.delete_recording(recording_id)
        assert not junk.exists() and not cut.exists()


def test_who_may_record_list_and_stop(tmp_path):
    (tmp_path / "recordings").mkdir()
    with running_token_server(tmp_path, *record_dir_flags(tmp_path / "recordings")) as (
            server, admin, _):
        as_admin = pitlane.Client(server.address, token=admin)
        sid_a = as_admin.create_session(name="a").session_id
        sid_b = as_admin.create_session(name="b").session_id
        owner_a = pitlane.Client(server.address, token=as_admin.owner_tokens[sid_a][0])
        owner_b = pitlane.Client(server.address, token=as_admin.owner_tokens[sid_b][0])
        viewer, _ = owner_a.mint_token(sid_a, "viewer")
        recording = owner_a.start_recording(sid_a)
        # Another team's owner: as if it did not exist.
        with pytest.raises(grpc.RpcError) as other:
            owner_b.stop_recording(recording.recording_id)
        assert other.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as other_session:
            owner_b.start_recording(sid_a)
        assert other_session.value.code() == grpc.StatusCode.NOT_FOUND
        assert owner_b.list_recordings() == []
        # A viewer of the session sees it, may not stop it or start another.
        as_viewer = pitlane.Client(server.address, token=viewer)
        assert [r.recording_id for r in as_viewer.list_recordings()] == [recording.recording_id]
        with pytest.raises(grpc.RpcError) as denied:
            as_viewer.stop_recording(recording.recording_id)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as denied_start:
            as_viewer.start_recording(sid_a)
        assert denied_start.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # The admin sees and stops everything.
        b_recording = owner_b.start_recording(sid_b)
        assert {r.recording_id for r in as_admin.list_recordings()} == {
            recording.recording_id, b_recording.recording_id}
        assert as_admin.stop_recording(b_recording.recording_id).state == (
            pitlane.pb.RECORDING_STATE_COMPLETE)
        assert owner_a.stop_recording(recording.recording_id).end_reason == "stopped"


def http(base, path, token=None, method="GET", headers=None):
    """(status, headers, body) of one request to the web endpoint."""
    request = urllib.request.Request(base + path, method=method, headers=dict(headers or {}))
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_recordings_over_http_listed_fetched_and_deleted_by_the_same_rules(tmp_path):
    (tmp_path / "recordings").mkdir()
    with running_token_server(tmp_path, f"--record_dir={tmp_path / 'recordings'}",
                              "--http_listen=127.0.0.1:0") as (server, admin, _):
        base = f"http://{server.http_address()}"
        as_admin = pitlane.Client(server.address, token=admin)
        sid_a = as_admin.create_session(scenario="demo", clock_mode="lockstep").session_id
        sid_b = as_admin.create_session(name="b").session_id
        owner_a = as_admin.owner_tokens[sid_a][0]
        owner_b = as_admin.owner_tokens[sid_b][0]
        viewer, _ = pitlane.Client(server.address, token=owner_a).mint_token(sid_a, "viewer")
        client_a = pitlane.Client(server.address, token=owner_a)
        rid = client_a.start_recording(sid_a).recording_id
        client_a.step(sid_a, 200)
        stopped = client_a.stop_recording(rid)
        on_disk = (tmp_path / "recordings" / f"{rid}.mcap").read_bytes()
        assert len(on_disk) == stopped.bytes

        # Listed to those who may read it, by the names of ListRecordings' fields.
        status, _, body = http(base, "/recordings")
        assert status == 401 and "token" in json.loads(body)["error"]
        status, _, body = http(base, "/recordings", token=viewer)
        assert status == 200
        (listed,) = json.loads(body)["recordings"]
        assert listed["recording_id"] == rid and listed["session_id"] == sid_a
        assert listed["state"] == "complete" and listed["end_reason"] == "stopped"
        assert listed["ticks"] == stopped.ticks == 200 and listed["bytes"] == stopped.bytes
        assert listed["url"] == f"/recordings/{rid}.mcap"
        assert listed["options"] == {"telemetry_rate_hz": 10, "foxglove_rate_hz": 2,
                                     "max_bytes": 1 << 30, "max_duration_s": 3600}
        assert json.loads(http(base, "/recordings", token=owner_b)[2]) == {"recordings": []}

        # Fetched whole, in part (a resumed download), or not at all.
        status, headers, body = http(base, f"/recordings/{rid}.mcap", token=viewer)
        assert status == 200 and body == on_disk
        assert headers["Content-Disposition"] == f'attachment; filename="{rid}.mcap"'
        assert headers["Accept-Ranges"] == "bytes"
        status, headers, body = http(base, f"/recordings/{rid}.mcap?token={owner_a}",
                                     headers={"Range": "bytes=1000-"})
        assert status == 206 and body == on_disk[1000:]
        assert headers["Content-Range"] == f"bytes 1000-{len(on_disk) - 1}/{len(on_disk)}"
        status, _, body = http(base, f"/recordings/{rid}.mcap", token=owner_a,
                               headers={"Range": "bytes=-8"})
        assert status == 206 and body == on_disk[-8:] == b"\x89MCAP0\r\n"
        status, headers, _ = http(base, f"/recordings/{rid}.mcap", token=owner_a,
                                  headers={"Range": f"bytes={len(on_disk)}-"})
        assert status == 416 and headers["Content-Range"] == f"bytes */{len(on_disk)}"
        status, headers, body = http(base, f"/recordings/{rid}.mcap", token=owner_a, method="HEAD")
        assert status == 200 and int(headers["Content-Length"]) == len(on_disk) and body == b""
        for token in (owner_b, None):
            status, _, body = http(base, f"/recordings/{rid}.mcap", token=token)
            assert status == (404 if token else 401)
        assert http(base, "/recordings/r-nosuchrecording.mcap", token=admin)[0] == 404
        status, headers, _ = http(base, f"/recordings/{rid}.mcap", token=admin, method="POST")
        assert status == 405 and headers["Allow"] == "GET, HEAD"

        # Deleted by its session's owner or the admin only, from this server's pages or a script.
        status, _, body = http(base, f"/recordings/{rid}", token=viewer, method="DELETE")
        assert status == 403 and "owner" in json.loads(body)["error"]
        status, _, body = http(base, f"/recordings/{rid}", token=owner_a, method="DELETE",
                               headers={"Origin": "http://elsewhere.example"})
        assert status == 403 and "Origin" in json.loads(body)["error"]
        assert http(base, f"/recordings/{rid}", token=owner_b, method="DELETE")[0] == 404
        assert (tmp_path / "recordings" / f"{rid}.mcap").exists()
        status, _, body = http(base, f"/recordings/{rid}", token=owner_a, method="DELETE",
                               headers={"Origin": base})
        assert status == 200
        assert json.loads(body) == {"recording_id": rid, "bytes_freed": len(on_disk)}
        assert not (tmp_path / "recordings" / f"{rid}.mcap").exists()
        assert http(base, f"/recordings/{rid}.mcap", token=admin)[0] == 404
        assert server.has_line(lambda line: "action=recording.delete" in line and rid in line)


def test_recordings_from_the_command_line(tmp_path):
    (tmp_path / "recordings").mkdir()
    with running_token_server(tmp_path, *record_dir_flags(tmp_path / "recordings")) as (
            server, _, admin_file):
        def cli(*args):
            return subprocess.run([str(CLI), f"--address={server.address}",
                                   f"--token_file={admin_file}", *args],
                                  capture_output=True, text=True, timeout=60, check=False)

        def ok(*args):
            done = cli(*args)
            assert done.returncode == 0, done.stderr
            return done.stdout.split("\n")[:-1]

        sid = ok("create", "--scenario=demo", "--clock=lockstep")[0]
        (rid,) = ok("record", sid, "--telemetry_rate_hz=5", "--foxglove_rate_hz=0")
        assert rid.startswith("r-")
        ok("step", sid, "--ticks=100")
        header, row = ok("recordings")
        assert header.split() == ["RECORDING", "SESSION", "STATE", "TICKS", "SECONDS", "BYTES"]
        assert row.split()[:4] == [rid, sid, "recording", "100"]
        assert ok("stop-recording", rid)[0].startswith("100 ticks, ")
        out = tmp_path / "fetched.mcap"
        assert ok("fetch", rid, f"--out={out}") == [f"{out} {out.stat().st_size} bytes"]
        assert out.read_bytes() == (tmp_path / "recordings" / f"{rid}.mcap").read_bytes()
        assert not (tmp_path / "fetched.mcap.part").exists()
        # Read back by @mcap/core: 100 hashes; demo ticks at 50 Hz, so 2 s at 5 Hz is 10
        # telemetry frames after the one at the start.
        topics = decode(out)["topics"]
        assert topics["/pitlane/state_hash"]["count"] == 100
        assert topics["/pitlane/states"]["count"] == 11
        assert not any(topic.startswith(f"/{sid}/") for topic in topics)  # No Foxglove channels.
        # Played back: 11 frames, 0.2 s apart; its owner token shown once.
        played, owner = ok("play", rid, "--clock=lockstep", "--start_s=1.0")
        assert played.startswith("s-") and owner.startswith("owner token: plt_")
        assert ok("seek", played, "--time_s=1.5") == ["frame 7 of 11, tick 70, 1.500 s"]
        assert ok("step", played, "--ticks=5") == ["80"]
        bad_seek = cli("seek", played)
        assert bad_seek.returncode == 2 and "--time_s" in bad_seek.stderr
        bad_clock = cli("play", rid, "--clock=barrier")
        assert bad_clock.returncode == 2 and "--clock" in bad_clock.stderr
        ok("rm", played)
        ok("rm-recording", rid)
        missing = cli("fetch", rid, f"--out={tmp_path / 'again.mcap'}")
        assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
        assert not (tmp_path / "again.mcap").exists()
        assert not (tmp_path / "again.mcap.part").exists()
        bad = cli("fetch", "../x")
        assert bad.returncode == 2 and "--out" in bad.stderr


def test_recordings_over_http_say_when_recording_is_off():
    with running_server("--http_listen=127.0.0.1:0") as server:
        status, _, body = http(f"http://{server.http_address()}", "/recordings")
        assert status == 404 and "--record_dir" in json.loads(body)["error"]


def test_a_download_that_does_not_add_up_leaves_nothing(tmp_path):
    """The client's download checks what the server sent (pieces that follow each other and
    add up to the size they state): a stream that breaks that is an error, and no file or
    part is left. (The server never sends such a stream: the pieces are made here.)"""
    from pitlane.client import _Download  # pylint: disable=import-outside-toplevel

    class Call:
        cancelled = False

        def cancel(self):
            self.cancelled = True

    piece = pitlane.pb.DownloadRecordingResponse
    for pieces, message in [
            ([piece(data=b"abcd", offset=0, size=10)], "got 4 of 10 bytes"),
            ([piece(data=b"abcd", offset=0, size=8), piece(data=b"efgh", offset=5, size=8)],
             "a piece at 5"),
            ([piece(data=b"abcd", offset=0, size=8), piece(data=b"efgh", offset=4, size=9)],
             "of 9 bytes"),
    ]:
        call = Call()
        path = tmp_path / "run.mcap"
        with pytest.raises(RuntimeError, match=message):
            with _Download(str(path), call) as download:
                for p in pieces:
                    download.add(p)
        assert call.cancelled and not path.exists() and not (tmp_path / "run.mcap.part").exists()
    with _Download(str(path), Call()) as download:
        download.add(piece(data=b"abcd", offset=0, size=4))
    assert path.read_bytes() == b"abcd" and download.written == 4


def test_the_asyncio_client_records_and_fetches(tmp_path):
    import asyncio  # pylint: disable=import-outside-toplevel
    import pitlane.aio  # pylint: disable=import-outside-toplevel

    async def main(address):
        async with pitlane.aio.Client(address, timeout_s=30.0) as sim:
            sid = (await sim.create_session(scenario="demo", clock_mode="lockstep")).session_id
            recording = await sim.start_recording(sid)
            await sim.step(sid, 100)
            done = await sim.stop_recording(recording.recording_id)
            fetched = tmp_path / "aio.mcap"
            size = await sim.download_recording(done.recording_id, str(fetched))
            listed = [r.recording_id for r in await sim.list_recordings()]
            await sim.delete_recording(done.recording_id)
            return done, size, fetched, listed

    (tmp_path / "recordings").mkdir()
    with running_server(*record_dir_flags(tmp_path / "recordings")) as server:
        done, size, fetched, listed = asyncio.run(asyncio.wait_for(main(server.address), 60))
    assert size == done.bytes == fetched.stat().st_size and listed == [done.recording_id]
    assert pitlane.read_recording(str(fetched)).hashes["tick"][-1] == 100
    assert not (tmp_path / "recordings" / f"{done.recording_id}.mcap").exists()


def record_demo(client, seconds):
    """Records `seconds` of the demo scenario (LOCKSTEP, telemetry at 10 Hz) and stops; returns
    (session id, stopped recording, the frames the session showed at each recorded tick)."""
    sid = client.create_session(scenario="demo", clock_mode="lockstep").session_id
    recording = client.start_recording(sid)
    shown = {0: client.get_state(sid)}
    for _ in range(int(seconds * 10)):
        client.step(sid, 5)
        state = client.get_state(sid)
        shown[state.time.tick] = state
    return sid, client.stop_recording(recording.recording_id), shown


def poses(state):
    return {v.vehicle_id: (v.x_m, v.y_m) for v in state.vehicles}


def assert_same_poses(played, live):
    """The recording keeps positions to the millimetre."""
    assert played.keys() == live.keys()
    for vehicle, (x, y) in live.items():
        assert played[vehicle][0] == pytest.approx(x, abs=0.0006), vehicle
        assert played[vehicle][1] == pytest.approx(y, abs=0.0006), vehicle


def test_a_recording_plays_back_into_a_read_only_session(tmp_path):
    with running_server(*record_dir_flags(tmp_path)) as server:
        client = pitlane.Client(server.address)
        sid, recording, shown = record_demo(client, 20.0)
        assert recording.state == pitlane.pb.RECORDING_STATE_COMPLETE
        # LOCKSTEP: moved by Steps of the recorded rate (50 Hz; a frame every 5 ticks).
        played = client.play_recording(recording.recording_id, clock_mode="lockstep",
                                       start_time_s=5.0)
        pid = played.session_id
        assert pid != sid
        assert played.playback.recording_id == recording.recording_id
        assert played.playback.position_s == pytest.approx(5.0)
        assert played.playback.duration_s == pytest.approx(20.0)
        assert played.playback.frame_count == 201
        assert played.playback.frame == 50
        assert played.time.tick == 250  # The recorded session's tick at 5 s.
        assert played.config.tick_rate_hz == 50.0
        assert played.config.name == f"playback of {recording.recording_id}"
        assert played.vehicle_count == 7
        assert_same_poses(poses(client.get_state(pid)), poses(shown[250]))
        described = client.get_session(pid)
        assert {v.vehicle_id for v in described.vehicles} == set(range(1, 8))
        assert described.playback.frame == 50
        # StreamStates sees the frames as they come, each once, at their recorded ticks.
        stream = client.stream_states(pid)
        first = next(stream)
        assert first.state.time.tick == 250
        ticks = []
        for _ in range(4):  # 40 ms, then 60 ms: a new frame every 100 ms of recording.
            client.step(pid, 2)
            client.step(pid, 3)
            ticks.append(next(stream).state.time.tick)
        assert ticks == [255, 260, 265, 270]
        stream.cancel()
        assert_same_poses(poses(client.get_state(pid)), poses(shown[270]))
        # Seek: back and forth; past the end, the last frame.
        sought = client.seek_playback(pid, 12.34)
        assert sought.playback.frame == 123 and sought.time.tick == 615
        assert_same_poses(poses(client.get_state(pid)), poses(shown[615]))
        end = client.seek_playback(pid, 1e6)
        assert end.playback.frame == 200 and end.playback.position_s == pytest.approx(20.0)
        with pytest.raises(grpc.RpcError) as at_end:
            client.step(pid, 1)
        assert at_end.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert "end of recording" in at_end.value.details()
        # Reset: back to its first frame.
        reset = client.reset_session(pid)
        assert reset.time.tick == 0
        assert client.get_session(pid).playback.frame == 0
        # Nothing changes its world.
        for call in (lambda: client.spawn_vehicles(pid, [pitlane.vehicle_spec()]),
                     lambda: client.remove_vehicle(pid, 1),
                     lambda: client.set_controls(pid, [pitlane.control(1)]),
                     lambda: client.start_recording(pid),
                     lambda: client.set_clock(pid, clock_mode="barrier")):
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert client.get_session(pid).vehicle_count == 7
        for bad in (-1.0, float("nan"), float("inf")):
            with pytest.raises(grpc.RpcError) as bad_time:
                client.stub.SeekPlayback(
                    pitlane.pb.SeekPlaybackRequest(session_id=pid, time_s=bad), timeout=30)
            assert bad_time.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert bad_time.value.details().startswith("time_s:")
        assert client.get_session(pid).playback.frame == 0  # Unmoved.
        # A live session does not seek.
        with pytest.raises(grpc.RpcError) as live:
            client.seek_playback(sid, 1.0)
        assert live.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "plays no recording back" in live.value.details()

        # REALTIME at 20x: 20 s of recording in about a second, seen through StreamStates, and
        # paused by itself at the end.
        fast = client.play_recording(recording.recording_id, real_time_factor=20.0)
        seen = []
        for message in client.stream_states(fast.session_id, timeout_s=60):
            seen.append(message.state.time.tick)
            if message.state.time.tick == 1000:
                break
        assert seen[0] <= 10 and seen[-1] == 1000
        assert seen == sorted(seen) and len(seen) > 20
        assert all(tick % 5 == 0 for tick in seen)
        for _ in range(100):
            info = client.get_session(fast.session_id)
            if info.config.paused:
                break
            time.sleep(0.05)
        assert info.config.paused and info.playback.frame == 200
        client.seek_playback(fast.session_id, 0.0)
        client.set_clock(fast.session_id, paused=False)


@pytest.mark.parametrize("request_fields, field", [
    ({"start_time_s": -1.0}, "start_time_s"),
    ({"start_time_s": float("nan")}, "start_time_s"),
    ({"clock_mode": pitlane.pb.CLOCK_MODE_BARRIER}, "clock_mode"),
    ({"clock_mode": 7}, "clock_mode"),
    ({"real_time_factor": -2.0}, "real_time_factor"),
    ({"name": "x" * 200}, "name"),
])
def test_play_recording_errors_name_their_field(tmp_path, request_fields, field):
    with running_server(*record_dir_flags(tmp_path)) as server:
        client = pitlane.Client(server.address)
        _, recording, _ = record_demo(client, 0.5)
        request = pitlane.pb.PlayRecordingRequest(recording_id=recording.recording_id,
                                                  **request_fields)
        with pytest.raises(grpc.RpcError) as error:
            client.stub.PlayRecording(request, timeout=30)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.value.details().startswith(field + ":"), error.value.details()
        assert len(client.list_sessions()) == 1  # Nothing was made.


def test_who_may_play_a_recording_back(tmp_path):
    (tmp_path / "recordings").mkdir()
    with running_token_server(tmp_path, *record_dir_flags(tmp_path / "recordings")) as (
            server, admin, _):
        as_admin = pitlane.Client(server.address, token=admin)
        sid = as_admin.create_session(name="a").session_id
        as_owner = pitlane.Client(server.address, token=as_admin.owner_tokens[sid][0])
        viewer, _ = as_owner.mint_token(sid, "viewer")
        recording = as_owner.start_recording(sid)
        as_owner.step(sid, 10)
        with pytest.raises(grpc.RpcError) as running:
            as_owner.play_recording(recording.recording_id)
        assert running.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        as_owner.stop_recording(recording.recording_id)
        # A viewer token may not make sessions; another team does not see the recording.
        with pytest.raises(grpc.RpcError) as denied:
            pitlane.Client(server.address, token=viewer).play_recording(recording.recording_id)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        other = as_admin.create_session(name="b").session_id
        as_other = pitlane.Client(server.address, token=as_admin.owner_tokens[other][0])
        with pytest.raises(grpc.RpcError) as hidden:
            as_other.play_recording(recording.recording_id)
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        # The owner plays it, gets the playback's owner token, and seeks with it.
        played = as_owner.play_recording(recording.recording_id, clock_mode="lockstep")
        assert played.session_id in as_owner.owner_tokens
        assert as_owner.seek_playback(played.session_id, 0.1).playback.frame >= 0
        # Another owner may not seek it.
        with pytest.raises(grpc.RpcError) as not_theirs:
            as_other.seek_playback(played.session_id, 0.0)
        assert not_theirs.value.code() == grpc.StatusCode.NOT_FOUND
