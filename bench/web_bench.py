#!/usr/bin/python3
"""Measures the web endpoint (docs/benchmarks.md, "The web endpoint"): server CPU per viewer of
a 1,000-car REALTIME session at 20 Hz (the viewer's channel and Foxglove's scene), the clock
with 100 viewers, bytes per car on the viewer's channel, and how fast the viewer draws 5,000
cars in headless Chromium.

    bench/web_bench.py [--server build/bin/pitlane-server] [--seconds 10]

Server CPU is the process's user+system time (/proc/<pid>/stat) over the window, minus the
same window with no viewer; the clients run in this process, outside the measure."""

import argparse
import os
import pathlib
import select
import statistics
import struct
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "client" / "python")]
os.environ.setdefault("PITLANE_SERVER", str(ROOT / "build" / "bin" / "pitlane-server"))

import pitlane  # noqa: E402
from browser import Browser  # noqa: E402
from conftest import running_server  # noqa: E402
from websocket_client import WebSocket, message_data  # noqa: E402

HTTP = "--http_listen=127.0.0.1:0"
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def channel_id(ws, topic):
    while True:
        message = ws.receive_json()
        if message["op"] == "advertise":
            for channel in message["channels"]:
                if channel["topic"] == topic:
                    return channel["id"]


class Readers:
    """`count` WebSocket clients subscribed to `topic`, read by one thread with select."""

    def __init__(self, address, topic, count, viewer):
        query = "?viewer=1&rate_hz=20" if viewer else "?rate_hz=20"
        self.sockets = []
        for i in range(count):
            ws = WebSocket(address, path="/foxglove" + query)
            ws.send_json({"op": "subscribe",
                          "subscriptions": [{"id": 1, "channelId": channel_id(ws, topic)}]})
            self.sockets.append(ws)
        self.bytes = 0
        self.frames = 0
        self.frame_sizes = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        by_socket = {ws.sock: ws for ws in self.sockets}
        for ws in self.sockets:
            ws.sock.setblocking(True)
        while not self.stop:
            ready, _, _ = select.select(list(by_socket), [], [], 0.1)
            for sock in ready:
                ws = by_socket[sock]
                opcode, payload = ws.receive()
                self.bytes += len(payload)
                if opcode == 0x2:
                    self.frames += 1
                    _, _, data = message_data(payload)
                    if data[:1] == b"F" and len(self.frame_sizes) < 1000:
                        self.frame_sizes.append(len(data))

    def close(self):
        self.stop = True
        self.thread.join()
        for ws in self.sockets:
            ws.sock.close()


def big_session(client, cars, clock_mode="realtime"):
    side = int(cars ** 0.5) + 1
    sid = client.create_session(name=f"{cars} cars", clock_mode=clock_mode,
                                bounds=(-30.0 * side, -30.0 * side, 30.0 * side, 30.0 * side)).session_id
    for first in range(0, cars, 10000):
        client.spawn_vehicles(sid, [
            pitlane.vehicle_spec(x_m=-15.0 * side + 30.0 * (i % side),
                                 y_m=-15.0 * side + 30.0 * (i // side), speed_mps=2)
            for i in range(first, min(cars, first + 10000))])
    return sid


def measure_cpu(server, client, sid, topic, viewers, seconds, viewer_channel):
    readers = Readers(server.http_address(), topic, viewers, viewer_channel) if viewers else None
    time.sleep(1.0)  # Settle.
    before_stats = client.get_session(sid)
    cpu0, t0 = cpu_seconds(server.proc.pid), time.monotonic()
    frames0 = readers.frames if readers else 0
    time.sleep(seconds)
    cpu1, t1 = cpu_seconds(server.proc.pid), time.monotonic()
    frames = (readers.frames - frames0) if readers else 0
    after_stats = client.get_session(sid)
    sizes = readers.frame_sizes if readers else []
    if readers:
        readers.close()
    elapsed = t1 - t0
    ticks = after_stats.time.tick - before_stats.time.tick
    return {
        "cpu_per_s": (cpu1 - cpu0) / elapsed,
        "frames_per_viewer_per_s": frames / elapsed / viewers if viewers else 0.0,
        "ticks_per_s": ticks / elapsed,
        "missed": after_stats.clock_stats.missed_deadlines - before_stats.clock_stats.missed_deadlines,
        "lateness_p99_ms": after_stats.clock_stats.lateness_p99_ms,
        "frame_bytes": statistics.median(sizes) if sizes else 0,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}")
    with running_server(HTTP) as server, pitlane.Client(server.address, timeout_s=120) as client:
        sid = big_session(client, 1000)
        base = measure_cpu(server, client, sid, None, 0, args.seconds, True)
        print(f"1,000-car REALTIME session, no viewer: server CPU {base['cpu_per_s'] * 1000:.0f} ms/s, "
              f"{base['ticks_per_s']:.1f} ticks/s")
        for topic_kind, viewer in (("viewer", True), ("scene", False)):
            for viewers in (1, 10, 100):
                m = measure_cpu(server, client, sid, f"/{sid}/{topic_kind}", viewers, args.seconds, viewer)
                per_viewer = (m["cpu_per_s"] - base["cpu_per_s"]) / viewers * 1000
                extra = ""
                if viewer and m["frame_bytes"]:
                    extra = (f", frame {m['frame_bytes']:.0f} B = "
                             f"{(m['frame_bytes'] - 32) / 1000:.1f} B/car + 32 B header")
                print(f"  {viewers:3d} x {topic_kind:6s}: server CPU {m['cpu_per_s'] * 1000:6.0f} ms/s, "
                      f"{per_viewer:6.2f} ms/s per viewer; {m['frames_per_viewer_per_s']:.1f} frames/s "
                      f"each; clock {m['ticks_per_s']:.1f} ticks/s, missed {m['missed']}, "
                      f"lateness p99 {m['lateness_p99_ms']:.2f} ms{extra}")
        client.delete_session(sid)

        # The viewer drawing 5,000 cars in headless Chromium.
        sid = big_session(client, 5000, clock_mode="lockstep")
        client.step(sid, 1)
        with Browser() as browser:
            browser.open(f"http://{server.http_address()}/?session={sid}")
            browser.wait_for("window.pitlane && pitlane.state.frame && pitlane.state.frame.count === 5000",
                             timeout_ms=30000)
            draws = [browser.eval("pitlane.benchmarkDraw(30)") for _ in range(5)]
            zoomed = browser.eval("(() => { pitlane.state.view.scale *= 8; return pitlane.benchmarkDraw(30); })()")
        ms = statistics.median(draws)
        print(f"viewer, 5,000 cars, whole world in a 1200x800 window: {ms:.2f} ms a frame "
              f"(median of {len(draws)} x 30 draws) = {1000 / ms:.0f} frames/s; zoomed in x8: "
              f"{zoomed:.2f} ms = {1000 / zoomed:.0f} frames/s")


if __name__ == "__main__":
    main()
