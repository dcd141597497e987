"""Pitlane simulator client.

``pitlane.Client`` wraps the gRPC API; ``pitlane.pb`` is the generated message
module (pitlane.v1.simulator_pb2) for building any request or reading any
response, and ``pitlane.pb_grpc`` the generated service module.
"""

from pitlane.client import (
    VEHICLE_TABLE_COLUMNS,
    Client,
    Driver,
    control,
    obstacle_spec,
    replica_of,
    vehicle_spec,
    vehicle_table,
)
from pitlane.recordings import Recording, read_recording
from pitlane.v1 import simulator_pb2 as pb
from pitlane.v1 import simulator_pb2_grpc as pb_grpc

__all__ = [
    "Client",
    "Driver",
    "VEHICLE_TABLE_COLUMNS",
    "control",
    "obstacle_spec",
    "replica_of",
    "vehicle_spec",
    "vehicle_table",
    "Recording",
    "read_recording",
    "pb",
    "pb_grpc",
]
