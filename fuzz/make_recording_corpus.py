#!/usr/bin/python3
"""Writes small recording seeds for recording_fuzzer into fuzz/corpus/recording_fuzzer/: MCAP
files (written here from the spec: https://mcap.dev) holding the messages of a recording's own
channels, in an uncompressed chunk, in a zstd chunk, and outside chunks (schemas kept empty: the
fuzzer decodes by topic). Rerun after changing a seed here. Needs the generated pitlane.v1
modules (a build) and python3-zstandard."""

import pathlib
import struct
import sys
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))

import zstandard  # noqa: E402

from pitlane.v1 import simulator_pb2 as pb  # noqa: E402

MAGIC = b"\x89MCAP0\r\n"


def record(opcode, body):
    return struct.pack("<BQ", opcode, len(body)) + body


def string(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<I", len(data)) + data


def messages():
    header = pb.RecordingHeader(recording_id="r-seed", session_id="s-seed",
                                replayable_from_start=True, telemetry_every_n_ticks=5,
                                first_vehicle_id=1, first_obstacle_id=1)
    header.config.name = "seed"
    track = header.config.tracks.add(name="ring", closed=True)
    for x, y in ((0, 0), (50, 0), (50, 30)):
        track.points.add(x_m=x, y_m=y)
    spawn = pb.RecordedCommand(tick=0)
    car = spawn.spawn.vehicles.add(name="car")
    car.kinematic_bicycle.SetInParent()
    car.driver.route_follower.track = "ring"
    controls = pb.RecordedCommand(tick=3)
    controls.set_controls.controls.add(vehicle_id=1, acceleration_mps2=1.0)
    clock = pb.RecordedCommand(tick=3)
    clock.set_clock.paused = True
    reset = pb.RecordedCommand(tick=4)
    reset.reset.SetInParent()
    out = [("/pitlane/session", header), ("/pitlane/commands", spawn)]
    out += [("/pitlane/state_hash", pb.TickHash(tick=t, state_hash=0x1234 * t)) for t in (1, 2, 3)]
    out += [("/pitlane/commands", controls), ("/pitlane/commands", clock),
            ("/pitlane/commands", pb.RecordedCommand(tick=3, remove_vehicle=1)),
            ("/pitlane/commands", pb.RecordedCommand(tick=3, step=5)),
            ("/pitlane/commands", reset),
            ("/pitlane/gaps", pb.RecordingGap(kind=pb.RecordingGap.KIND_COMMANDS, count=2,
                                              first_tick=1, last_tick=2, run=1)),
            ("/pitlane/end", pb.RecordingEnd(reason="stopped", ticks=3))]
    return out


def body_records():
    topics = sorted({topic for topic, _ in messages()})
    records = b""
    for i, topic in enumerate(topics):
        records += record(0x03, struct.pack("<H", i + 1) + string("pitlane.v1.X") +
                          string("protobuf") + string(b""))
        records += record(0x04, struct.pack("<HH", i, i + 1) + string(topic) +
                          string("protobuf") + struct.pack("<I", 0))
    for sequence, (topic, message) in enumerate(messages()):
        records += record(0x05, struct.pack("<HIQQ", topics.index(topic), sequence, sequence,
                                            sequence) + message.SerializeToString())
    return records


def chunk(records, compression):
    data = zstandard.ZstdCompressor().compress(records) if compression == "zstd" else records
    return record(0x06, struct.pack("<QQQI", 0, 20, len(records), zlib.crc32(records)) +
                  string(compression) + struct.pack("<Q", len(data)) + data)


def file(data):
    header = record(0x01, string("") + string("pitlane-seed"))
    return MAGIC + header + data + record(0x0F, struct.pack("<I", 0)) + \
        record(0x02, struct.pack("<QQI", 0, 0, 0)) + MAGIC


def main():
    out = ROOT / "fuzz" / "corpus" / "recording_fuzzer"
    out.mkdir(parents=True, exist_ok=True)
    records = body_records()
    (out / "chunk-none.mcap").write_bytes(file(chunk(records, "")))
    (out / "chunk-zstd.mcap").write_bytes(file(chunk(records, "zstd")))
    (out / "unchunked.mcap").write_bytes(file(records))
    (out / "cut.mcap").write_bytes(file(chunk(records, "zstd"))[:200])


if __name__ == "__main__":
    main()
