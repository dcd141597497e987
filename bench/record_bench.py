#!/usr/bin/python3
"""What recordings weigh on disk, and how fast a reader seeks in a big one.

    /usr/bin/python3 bench/record_bench.py [--server build/bin/pitlane-server] [--big-gib 1]

Starts a server with --record_dir in a temporary directory; records the `demo` and `highway`
scenarios for 60 s of simulated time each (LOCKSTEP, Steps of 50 ticks), with the default
options (telemetry at 10 Hz, the Foxglove channels at 2 Hz), with no Foxglove channels, and
with them at 10 Hz; prints the file's size per vehicle-state (a vehicle in a telemetry
frame) and per vehicle-tick. With
--big-gib, then records a 1,000-car session until its file reaches that size, and times
Foxglove's reader (@mcap/core, tests/web/mcap_decode.mjs) opening it through its summary and
reading the first message from the middle of its time span, then the server's own playback:
PlayRecording from the middle and SeekPlayback across the file (--big-only skips the sizes).
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))

import pitlane  # noqa: E402


def start_server(binary, record_dir):
    proc = subprocess.Popen(
        [binary, "--listen=127.0.0.1:0", "--http_listen=", f"--record_dir={record_dir}",
         "--max_recording_mib=4096", "--record_quota_mib=8192", "--max_recording_s=1000000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            return proc, f"127.0.0.1:{match.group(1)}"
    raise RuntimeError("the server did not start")


def record_scenario(client, scenario, foxglove_rate_hz=None, seconds=60):
    sid = client.create_session(scenario=scenario, clock_mode="lockstep").session_id
    recording = client.start_recording(sid, foxglove_rate_hz=foxglove_rate_hz)
    vehicles = client.get_session(sid).vehicle_count
    ticks = int(seconds * 50)
    for _ in range(ticks // 50):
        client.step(sid, 50)
    done = client.stop_recording(recording.recording_id)
    frames = ticks // 5 + 1
    foxglove = ("Foxglove 2 Hz (default)" if foxglove_rate_hz is None
                else f"Foxglove {foxglove_rate_hz:g} Hz")
    print(f"{scenario}, {foxglove}: {vehicles} vehicles, {seconds} s: {done.bytes / 1e6:.3f} MB, "
          f"{done.bytes / (vehicles * frames):.1f} bytes per vehicle-state (10 Hz), "
          f"{done.bytes / (vehicles * ticks):.1f} per vehicle-tick, "
          f"frames lost {done.frames_lost}")
    client.delete_session(sid)


def big_recording(client, record_dir, gib):
    sid = client.create_session(name="big", clock_mode="lockstep", max_vehicles=1000).session_id
    client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0 * (i % 100), y_m=10.0 * (i // 100),
                                                     speed_mps=5.0 + i % 20)
                                for i in range(1000)])
    recording = client.start_recording(sid, telemetry_rate_hz=50.0, max_bytes=int(gib * (1 << 30)))
    started = time.monotonic()
    while True:
        client.step(sid, 50)
        info = {r.recording_id: r for r in client.list_recordings()}[recording.recording_id]
        if info.state != pitlane.pb.RECORDING_STATE_RECORDING:
            break
    took = time.monotonic() - started
    path = pathlib.Path(record_dir) / f"{recording.recording_id}.mcap"
    print(f"big: {info.bytes / (1 << 30):.2f} GiB, {info.ticks} ticks in {took:.0f} s "
          f"({info.end_reason}), frames lost {info.frames_lost}")
    header = json.loads(subprocess.run(
        ["node", str(ROOT / "tests" / "web" / "mcap_decode.mjs"), str(path), "--keep=/pitlane/session",
         "--topic=/pitlane/session"],
        capture_output=True, text=True, check=True).stdout)
    session = header["topics"]["/pitlane/session"]["messages"][0]["value"]
    middle = int(session["time_origin_unix_ns"]) + info.ticks * 20_000_000 // 2
    seek = json.loads(subprocess.run(
        ["node", str(ROOT / "tests" / "web" / "mcap_decode.mjs"), str(path), f"--seek={middle}"],
        capture_output=True, text=True, check=True).stdout)
    print(f"big: opened through its summary in {seek['initialize_ms']:.0f} ms; first message "
          f"from the middle in {seek['seek_ms']:.1f} ms")
    # Our own playback: a new session showing the frame from the middle (the file opened
    # through its indexes, one chunk decoded), then seeks across the file, each answered
    # once its frame is shown.
    duration_s = info.ticks * 0.02
    started = time.monotonic()
    played = client.play_recording(recording.recording_id, clock_mode="lockstep",
                                   start_time_s=duration_s / 2)
    opened_ms = (time.monotonic() - started) * 1e3
    seeks = []
    for k in range(21):
        target = duration_s * ((k * 7919) % 21) / 20  # Back and forth over the whole file.
        started = time.monotonic()
        client.seek_playback(played.session_id, target)
        seeks.append((time.monotonic() - started) * 1e3)
    seeks.sort()
    print(f"big: PlayRecording from the middle in {opened_ms:.0f} ms "
          f"({played.playback.frame_count} frames); SeekPlayback median {seeks[10]:.1f} ms, "
          f"max {seeks[-1]:.1f} ms (21 seeks)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default=str(ROOT / "build" / "bin" / "pitlane-server"))
    parser.add_argument("--big-gib", type=float, default=0.0)
    parser.add_argument("--big-only", action="store_true", help="skip the scenarios' sizes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as record_dir:
        proc, address = start_server(args.server, record_dir)
        try:
            client = pitlane.Client(address, timeout_s=600)
            for scenario in () if args.big_only else ("demo", "highway"):
                for foxglove_rate_hz in (None, 0.0, 10.0):
                    record_scenario(client, scenario, foxglove_rate_hz)
            if args.big_gib > 0:
                big_recording(client, record_dir, args.big_gib)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
