"""Reading a Pitlane recording (an MCAP file, docs/recording.md) into Python objects and arrays.

    import pitlane
    client.download_recording(recording_id, "run.mcap")
    run = pitlane.read_recording("run.mcap")
    run.header.session_id, len(run.commands), run.vehicles[3].name
    run.hashes["tick"], run.hashes["state_hash"]        # every tick
    run.states["x_m"][run.states["vehicle_id"] == 3]    # each telemetry frame's vehicles

A small streaming MCAP reader written here from the public specification (https://mcap.dev):
it reads a file's records in order, a file cut short up to its last whole record. Chunks
compressed with zstd (the server's) need the ``zstandard`` package (``pip install
pitlane-client[recordings]``); the arrays need numpy.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from pitlane.v1 import simulator_pb2 as pb

_MAGIC = b"\x89MCAP0\r\n"
_MAX_CHUNK_BYTES = 256 << 20  # As the server's reader.
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _DATA_END = 1, 2, 3, 4, 5, 6, 15

# The state columns read from /pitlane/states, per vehicle of each telemetry frame.
STATE_COLUMNS = ("run", "tick", "sim_time_s", "vehicle_id", "x_m", "y_m", "yaw_rad",
                 "speed_mps", "crashed")


@dataclass
class Recording:
    """A recording as read: its own messages decoded, the telemetry's states as arrays."""

    header: pb.RecordingHeader
    commands: List[pb.RecordedCommand] = field(default_factory=list)
    gaps: List[pb.RecordingGap] = field(default_factory=list)
    end: Optional[pb.RecordingEnd] = None
    # Every vehicle recorded, by id: its spec (None if it left before the writer saw it).
    vehicles: Dict[int, Optional[pb.VehicleSpec]] = field(default_factory=dict)
    # Every tick's hash: numpy arrays "run", "tick", "state_hash" (uint64).
    hashes: Dict[str, Any] = field(default_factory=dict)
    # One row per vehicle of each telemetry frame: numpy arrays named by STATE_COLUMNS.
    states: Dict[str, Any] = field(default_factory=dict)
    # The file ended before its summary (a server killed while recording).
    truncated: bool = False
    # Messages per topic.
    counts: Dict[str, int] = field(default_factory=dict)


class _Fields:
    def __init__(self, data: bytes, offset: int = 0):
        self.data, self.offset = data, offset

    def take(self, fmt: str) -> Tuple:
        size = struct.calcsize(fmt)
        if self.offset + size > len(self.data):
            raise ValueError("a record's fields run past its end")
        values = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return values

    def bytes32(self) -> bytes:
        (size,) = self.take("<I")
        return self.bytes_n(size)

    def bytes64(self) -> bytes:
        (size,) = self.take("<Q")
        return self.bytes_n(size)

    def bytes_n(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise ValueError("a record's fields run past its end")
        out = self.data[self.offset:self.offset + size]
        self.offset += size
        return out


def _decompress(compression: str, data: bytes, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        try:
            import zstandard  # pylint: disable=import-outside-toplevel
        except ImportError as missing:
            raise ImportError("reading a recording's zstd chunks needs the zstandard package: "
                              "pip install pitlane-client[recordings]") from missing
        # The frame must say the size the chunk declares (the server's always do), so that a
        # chunk cannot expand beyond it.
        if size > _MAX_CHUNK_BYTES or zstandard.frame_content_size(data) != size:
            raise ValueError("a zstd chunk's frame does not hold the size the chunk declares")
        return zstandard.ZstdDecompressor().decompress(data)
    raise ValueError(f"chunk compression {compression[:16]!r} is not zstd or none")


def iter_messages(data: bytes,
                  truncated: Optional[list] = None) -> Iterator[Tuple[str, int, bytes]]:
    """(topic, log time in ns, message bytes) of every message of an MCAP file's contents, in
    file order. Appends True to ``truncated`` if the file ends before its footer."""
    if not data.startswith(_MAGIC):
        raise ValueError("not an MCAP file: it does not begin with MCAP's magic")
    channels: Dict[int, str] = {}

    def records(block: bytes, start: int, in_chunk: bool) -> Iterator[Tuple[str, int, bytes]]:
        offset = start
        while offset < len(block):
            if len(block) - offset < 9:
                if in_chunk:
                    raise ValueError("a record inside a chunk is cut short")
                if truncated is not None:
                    truncated.append(True)
                return
            opcode = block[offset]
            (length,) = struct.unpack_from("<Q", block, offset + 1)
            if length > len(block) - offset - 9:
                if in_chunk:
                    raise ValueError("a record inside a chunk runs past its end")
                if truncated is not None:
                    truncated.append(True)
                return
            body = block[offset + 9:offset + 9 + length]
            offset += 9 + length
            if opcode in (_DATA_END, _FOOTER) and not in_chunk:
                return
            fields = _Fields(body)
            if opcode == _CHANNEL:
                (channel_id, _schema_id) = fields.take("<HH")
                channels[channel_id] = fields.bytes32().decode()
            elif opcode == _MESSAGE:
                (channel_id, _sequence, log_time, _publish_time) = fields.take("<HIQQ")
                if channel_id not in channels:
                    raise ValueError(f"a message on channel {channel_id}, never defined")
                yield channels[channel_id], log_time, body[fields.offset:]
            elif opcode == _CHUNK and not in_chunk:
                (_start, _end, size, crc) = fields.take("<QQQI")
                compression = fields.bytes32().decode()
                plain = _decompress(compression, fields.bytes64(), size)
                if len(plain) != size:
                    raise ValueError("a chunk does not decompress to the size it declares")
                if crc != 0 and zlib.crc32(plain) != crc:
                    raise ValueError("a chunk's CRC does not match its records")
                yield from records(plain, 0, True)
        if not in_chunk and truncated is not None:
            truncated.append(True)

    yield from records(data, len(_MAGIC), False)


def _state_columns(frames: List[pb.RecordedStates], np: Any) -> Dict[str, Any]:
    """The frames' columns, one row per vehicle of each, in the units of STATE_COLUMNS."""
    counts = np.array([len(f.vehicle_id_steps) for f in frames], dtype=np.int64)

    def column(name: str, dtype: Any) -> Any:
        values = [getattr(f, name) for f in frames]
        if not values:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([np.asarray(v, dtype=dtype) for v in values])

    def per_frame(name: str, dtype: Any) -> Any:
        return np.repeat(np.array([getattr(f, name) for f in frames], dtype=dtype), counts)

    # Ids: the steps summed within each frame.
    steps = column("vehicle_id_steps", np.uint64)
    ids = np.cumsum(steps, dtype=np.uint64)
    starts = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(counts)[:-1]))[:len(frames)]
    summed = np.concatenate((np.zeros(1, dtype=np.uint64), ids))
    before = np.repeat(summed[starts], counts)
    ids = ids - before
    crashed = np.zeros(len(ids), dtype=np.bool_)
    for i, frame in enumerate(frames):
        if frame.crashed_vehicle_ids:
            first = int(starts[i])
            block = ids[first:first + int(counts[i])]
            crashed[first:first + int(counts[i])] = np.isin(
                block, np.asarray(frame.crashed_vehicle_ids, dtype=np.uint64))
    return {
        "run": per_frame("run", np.uint64),
        "tick": per_frame("tick", np.uint64),
        "sim_time_s": per_frame("sim_time_s", np.float64),
        "vehicle_id": ids,
        "x_m": column("x_mm", np.float64) / 1e3,
        "y_m": column("y_mm", np.float64) / 1e3,
        "yaw_rad": column("yaw_100urad", np.float64) / 1e4,
        "speed_mps": column("speed_mmps", np.float64) / 1e3,
        "crashed": crashed,
    }


def read_recording(path: str) -> Recording:
    """Reads the recording at ``path``."""
    with open(path, "rb") as f:
        data = f.read()
    truncated: list = []
    header: Optional[pb.RecordingHeader] = None
    run = Recording(header=pb.RecordingHeader())
    hash_rows: List[Tuple[int, int, int]] = []
    frames: List[pb.RecordedStates] = []
    for topic, _, payload in iter_messages(data, truncated):
        run.counts[topic] = run.counts.get(topic, 0) + 1
        if topic == "/pitlane/session":
            header = pb.RecordingHeader.FromString(payload)
            run.header = header
        elif topic == "/pitlane/commands":
            command = pb.RecordedCommand.FromString(payload)
            run.commands.append(command)
        elif topic == "/pitlane/state_hash":
            hashed = pb.TickHash.FromString(payload)
            hash_rows.append((hashed.run, hashed.tick, hashed.state_hash))
        elif topic == "/pitlane/gaps":
            run.gaps.append(pb.RecordingGap.FromString(payload))
        elif topic == "/pitlane/end":
            run.end = pb.RecordingEnd.FromString(payload)
        elif topic == "/pitlane/states":
            frames.append(pb.RecordedStates.FromString(payload))
        elif topic == "/pitlane/vehicles":
            for vehicle in pb.RecordedVehicles.FromString(payload).vehicles:
                run.vehicles[vehicle.vehicle_id] = (vehicle.spec if vehicle.HasField("spec")
                                                    else None)
    if header is None:
        raise ValueError("not a Pitlane recording: it has no /pitlane/session message")
    run.truncated = bool(truncated)
    import numpy as np  # pylint: disable=import-outside-toplevel  # Only for the arrays.
    hashes = np.array(hash_rows, dtype=np.uint64).reshape(-1, 3)
    run.hashes = {"run": hashes[:, 0], "tick": hashes[:, 1], "state_hash": hashes[:, 2]}
    run.states = _state_columns(frames, np)
    return run
