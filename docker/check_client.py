"""What docker/check.sh asks of a running image, as a client outside the container would:
with the admin token, create a session over gRPC, spawn a car, step it and check the physics
moved it, recording it into the image's /data/recordings and fetching the file over HTTP; the
viewer's page, /readyz and /metrics (with the token; without it 401) answer; the Python
client's wheel is served at /python/.

    PYTHONPATH=<pitlane package> /usr/bin/python3 docker/check_client.py GRPC HTTP TOKEN_FILE
"""

import sys
import urllib.error
import urllib.request

import pitlane


def get(url, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def main(grpc_address, http_address, token_file):
    token = open(token_file, encoding="ascii").read().strip()
    with pitlane.Client(grpc_address, token=token, timeout_s=10.0) as client:
        session = client.create_session(name="docker-check").session_id
        recording = client.start_recording(session).recording_id
        car = client.spawn_vehicle(session, speed_mps=10.0)
        state = client.step(session, ticks=50)  # One second at 50 Hz.
        recorded = client.stop_recording(recording)
        x_m = state.vehicles[0].x_m
        # A kinematic bicycle at 10 m/s with no controls holds its speed: 10 m in a second.
        assert abs(x_m - 10.0) < 1e-6, x_m
        print(f"client: session {session}, car {car} drove {x_m:.3f} m in 50 ticks")
    base = f"http://{http_address}"
    request = urllib.request.Request(f"{base}/recordings/{recording}.mcap",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        data = response.read()
    assert len(data) == recorded.bytes and data[:8] == data[-8:] == b"\x89MCAP0\r\n", len(data)
    print(f"client: recorded {recorded.ticks} ticks into /data/recordings, fetched "
          f"{len(data)} bytes over HTTP")
    status, body = get(f"{base}/readyz")
    assert (status, body) == (200, "ready\n"), (status, body)
    status, body = get(f"{base}/")
    assert status == 200 and "<canvas" in body, status
    status, _ = get(f"{base}/metrics")
    assert status == 401, f"/metrics without a token: {status}"
    status, body = get(f"{base}/metrics", token)
    assert status == 200 and "pitlane_sessions" in body, status
    print(f"client: /readyz, the viewer page and /metrics ({len(body)} bytes) answer")
    status, body = get(f"{base}/python/")
    assert status == 200 and "pip install" in body, status
    wheel = body.split('href="', 1)[1].split('"', 1)[0]
    request = urllib.request.Request(f"{base}/python/{wheel}")
    with urllib.request.urlopen(request, timeout=10) as response:
        data = response.read()
    assert data[:4] == b"PK\x03\x04", data[:4]
    print(f"client: the Python client's wheel is served ({wheel}, {len(data)} bytes)")


if __name__ == "__main__":
    main(*sys.argv[1:])
