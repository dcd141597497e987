"""Standard gRPC services: health checking and server reflection."""

import grpc
import pytest
from google.protobuf import descriptor_pb2


@pytest.fixture
def channel(address):
    with grpc.insecure_channel(address) as ch:
        yield ch


@pytest.mark.parametrize("service", ["", "pitlane.v1.Simulator"])
def test_health_check_serving(channel, grpc_std, service):
    stub = grpc_std.health_pb2_grpc.HealthStub(channel)
    response = stub.Check(grpc_std.health_pb2.HealthCheckRequest(service=service),
                          timeout=10.0)
    assert response.status == grpc_std.health_pb2.HealthCheckResponse.SERVING


def _reflect(channel, grpc_std, **request):
    """Sends one ServerReflectionRequest; returns the single response."""
    stub = grpc_std.reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = iter([grpc_std.reflection_pb2.ServerReflectionRequest(**request)])
    (response,) = list(stub.ServerReflectionInfo(requests, timeout=10.0))
    return response


def test_reflection_lists_services(channel, grpc_std):
    response = _reflect(channel, grpc_std, list_services="*")
    names = [s.name for s in response.list_services_response.service]
    assert "pitlane.v1.Simulator" in names
    assert "grpc.health.v1.Health" in names


@pytest.mark.parametrize(
    "symbol, package, service",
    [
        ("pitlane.v1.Simulator", "pitlane.v1", "Simulator"),
        ("grpc.health.v1.Health", "grpc.health.v1", "Health"),
    ],
)
def test_reflection_file_containing_symbol(channel, grpc_std, symbol, package, service):
    response = _reflect(channel, grpc_std, file_containing_symbol=symbol)
    assert response.WhichOneof("message_response") == "file_descriptor_response", (
        response.error_response)
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in response.file_descriptor_response.file_descriptor_proto]
    assert any(f.package == package and service in [s.name for s in f.service]
               for f in files), [f.name for f in files]
