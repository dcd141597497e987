"""Fixtures for the end-to-end tests: the real server binary and clients.

Run from the repository root with ``/usr/bin/python3 -m pytest tests/e2e``.
The server binary is $PITLANE_SERVER, default build/bin/pitlane-server.
"""

import base64
import contextlib
import importlib
import os
import pathlib
import queue
import re
import resource
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import grpc
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO_ROOT / "client" / "python"
PROTO_DIR = REPO_ROOT / "proto"
GRPC_PROTO_DIR = pathlib.Path("/usr/share/grpc-proto")
GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"

SERVER = pathlib.Path(
    os.environ.get("PITLANE_SERVER", REPO_ROOT / "build" / "bin" / "pitlane-server")
)

# Limits of the shared server; the tests derive their bad inputs from these.
MAX_SESSIONS = 64
MAX_VEHICLES_PER_SESSION = 50
MAX_TICKS_PER_STEP = 1000

_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
# The banner line of the session --scenario starts; session ids are random (s- and base32).
_STARTUP_SESSION = re.compile(r'Scenario "[^"]*" is running as session (s-[a-z2-7]+)')
# The banner lines of the HTTP endpoint (/metrics, /healthz, /readyz) and of the metrics-only
# one (--metrics_listen).
_HTTP = re.compile(r"HTTP: +http://(127\.0\.0\.1:\d+)/metrics")
_METRICS = re.compile(r"Metrics: +http://(127\.0\.0\.1:\d+)/metrics")
_STARTUP_TIMEOUT_S = 20.0
_SHUTDOWN_TIMEOUT_S = 10.0


def _protoc(include_dir, out_dir, *protos):
    """Generates Python messages and gRPC stubs for `protos` into out_dir."""
    subprocess.run(
        [
            "protoc",
            f"-I{include_dir}",
            f"--python_out={out_dir}",
            f"--grpc_out={out_dir}",
            f"--plugin=protoc-gen-grpc={GRPC_PYTHON_PLUGIN}",
            *[str(p) for p in protos],
        ],
        check=True,
    )


# The build generates client/python/pitlane/v1/; do it here if it has not run.
if not (CLIENT_DIR / "pitlane" / "v1" / "simulator_pb2_grpc.py").exists():
    _protoc(PROTO_DIR, CLIENT_DIR, PROTO_DIR / "pitlane" / "v1" / "simulator.proto")
    (CLIENT_DIR / "pitlane" / "v1" / "__init__.py").touch()
sys.path.insert(0, str(CLIENT_DIR))
sys.path.insert(0, str(CLIENT_DIR / "examples"))

import pitlane  # pylint: disable=wrong-import-position


class ServerProcess:
    """A running pitlane-server child process and its captured output."""

    def __init__(self, *flags, address_space_bytes=None, env=None):
        if not SERVER.is_file():
            pytest.fail(f"server binary not found: {SERVER} (build it or set PITLANE_SERVER)")
        self.output = []  # Lines of stdout and stderr, interleaved, prefixed.
        self._stdout_lines = queue.Queue()
        # No HTTP endpoint (8080 by default) unless a test asks for one (test_http.py): its
        # civetweb threads take about a second to stop, which every test would wait for.
        http = [] if any(f.startswith("--http_listen") for f in flags) else ["--http_listen="]
        self.proc = subprocess.Popen(
            [str(SERVER), "--listen=127.0.0.1:0", *http, *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # As `ulimit -v`: allocations beyond fail in the server (std::bad_alloc).
            preexec_fn=None if address_space_bytes is None else lambda: resource.setrlimit(
                resource.RLIMIT_AS, (address_space_bytes, address_space_bytes)),
            # Under a limit, one malloc arena: glibc reserves 64 MiB of address space for each
            # arena a new thread may open, which would make the room left depend on timing.
            # `env`: variables added to the test's own environment.
            env=dict(os.environ, **(env or {}),
                     **({} if address_space_bytes is None else {"MALLOC_ARENA_MAX": "1"})),
        )
        # Drain both pipes for the whole life of the server so it never blocks on them.
        for pipe, name in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr")):
            threading.Thread(target=self._drain, args=(pipe, name), daemon=True).start()
        self.address = self._wait_for_address()

    def _drain(self, pipe, name):
        for line in pipe:
            self.output.append(f"[{name}] {line.rstrip()}")
            if name == "stdout":
                self._stdout_lines.put(line)
        if name == "stdout":
            self._stdout_lines.put(None)

    def _wait_for_address(self):
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._stdout_lines.get(timeout=max(remaining, 0.0))
            except queue.Empty:
                line = None
            if line is not None:
                match = _LISTENING.search(line)
                if match:
                    return f"127.0.0.1:{match.group(1)}"
                continue
            exited = self.proc.poll() is not None
            self.proc.kill()
            self.proc.wait()
            time.sleep(0.1)  # Let the drain threads catch the last lines.
            why = (f"exited with code {self.proc.returncode} before printing" if exited
                   else f"did not print within {_STARTUP_TIMEOUT_S} s")
            pytest.fail(f"{SERVER} {why} 'listening on 127.0.0.1:<port>'; output:\n"
                        + "\n".join(self.output))

    def _banner_value(self, pattern, what):
        """The first group of `pattern` in a banner line (printed after the gRPC address, so
        it may still be on its way through the pipe)."""
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in list(self.output):
                match = pattern.search(line)
                if match:
                    return match.group(1)
            time.sleep(0.05)
        pytest.fail(f"no '{what}' banner line; output:\n" + "\n".join(self.output))

    def has_line(self, predicate, timeout_s=10.0):
        """Whether a line of output satisfies `predicate`, waiting for it a while (a line the
        server wrote may still be on its way through the pipe)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if any(predicate(line) for line in list(self.output)):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def http_address(self):
        """host:port of the HTTP endpoint, read from the banner."""
        return self._banner_value(_HTTP, "HTTP: http://...")

    def metrics_address(self):
        """host:port of the metrics-only endpoint (--metrics_listen), read from the banner."""
        return self._banner_value(_METRICS, "Metrics: http://...")

    def startup_session_id(self):
        """The id of the session started with --scenario, read from the banner that names
        it."""
        return self._banner_value(_STARTUP_SESSION, "Scenario ... is running as session <id>")

    def stop(self):
        """Sends SIGTERM, waits (kills after 10 s) and returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=_SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "killed: no exit within 10 s of SIGTERM"


@contextlib.contextmanager
def running_server(*flags, address_space_bytes=None):
    """Starts a server with `flags` (and an address-space limit in bytes, as `ulimit -v`,
    if given), yields it, stops it and checks it exited 0."""
    server = ServerProcess(*flags, address_space_bytes=address_space_bytes)
    try:
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"server exit code {code}; output:\n" + "\n".join(server.output)


@contextlib.contextmanager
def running_token_server(directory, *flags):
    """A server with --auth=token and a new admin token (in directory/admin.token, 0600);
    yields (server, token, token file)."""
    token = "plt_" + base64.b32encode(secrets.token_bytes(20)).decode().lower()
    token_file = pathlib.Path(directory) / "admin.token"
    token_file.write_text(token + "\n")
    os.chmod(token_file, 0o600)
    with running_server("--auth=token", f"--admin_token_file={token_file}", *flags) as srv:
        yield srv, token, token_file


@pytest.fixture(scope="session")
def server():
    """The shared server, with generous limits."""
    with running_server(
        f"--max_sessions={MAX_SESSIONS}",
        f"--max_vehicles_per_session={MAX_VEHICLES_PER_SESSION}",
        f"--max_ticks_per_step={MAX_TICKS_PER_STEP}",
    ) as srv:
        yield srv


@pytest.fixture(scope="session")
def address(server):
    """"127.0.0.1:<port>" of the shared server."""
    return server.address


@pytest.fixture(scope="session")
def client(address):
    """A pitlane.Client connected to the shared server."""
    with pitlane.Client(address, timeout_s=10.0) as c:
        yield c


@pytest.fixture
def session_id(client):
    """A fresh default session, deleted after the test (if the test did not)."""
    sid = client.create_session(name="e2e").session_id
    yield sid
    with contextlib.suppress(grpc.RpcError):
        client.delete_session(sid)


@pytest.fixture
def new_session(client):
    """Factory for sessions with a custom config, all deleted after the test."""
    created = []

    def create(**kwargs):
        sid = client.create_session(**kwargs).session_id
        created.append(sid)
        return sid

    yield create
    for sid in created:
        with contextlib.suppress(grpc.RpcError):
            client.delete_session(sid)


@pytest.fixture(scope="session")
def grpc_std(tmp_path_factory):
    """Generated modules for grpc.health.v1 and grpc.reflection.v1alpha.

    The generated files live under <tmp>/grpc/..., the same Python package name
    as the grpc library, so <tmp>/grpc is appended to grpc.__path__ to make
    grpc.health and grpc.reflection importable (grpcio itself ships neither).
    """
    out = tmp_path_factory.mktemp("grpc_std")
    _protoc(
        GRPC_PROTO_DIR,
        out,
        GRPC_PROTO_DIR / "grpc" / "health" / "v1" / "health.proto",
        GRPC_PROTO_DIR / "grpc" / "reflection" / "v1alpha" / "reflection.proto",
    )
    grpc.__path__.append(str(out / "grpc"))
    modules = {}
    for package in ("health.v1.health", "reflection.v1alpha.reflection"):
        for suffix in ("_pb2", "_pb2_grpc"):
            module = importlib.import_module(f"grpc.{package}{suffix}")
            modules[module.__name__.rsplit(".", 1)[1]] = module
    return SimpleNamespace(**modules)


def assert_rpc_error(call, code, *substrings):
    """Asserts call() fails with status `code`, details naming each substring.

    Substrings are matched case-insensitively. Returns the grpc.RpcError.
    """
    with pytest.raises(grpc.RpcError) as info:
        call()
    err = info.value
    assert err.code() == code, f"expected {code}, got {err.code()}: {err.details()!r}"
    for text in substrings:
        assert text.lower() in (err.details() or "").lower(), (
            f"{code} details {err.details()!r} do not name {text!r}"
        )
    return err


class StreamEnd:
    """Reads a stream to its end on a thread of its own; `code` is how it ended."""

    def __init__(self, stream):
        self.code = None
        self._thread = threading.Thread(target=self._drain, args=(stream,))
        self._thread.start()

    def _drain(self, stream):
        try:
            for _ in stream:
                pass
            self.code = grpc.StatusCode.OK
        except grpc.RpcError as err:
            self.code = err.code()

    def wait(self, timeout_s=5.0):
        """Waits for the end; returns its status code (None if it has not ended)."""
        self._thread.join(timeout=timeout_s)
        return self.code



def http2_frame(kind, flags, stream, payload):
    """One HTTP/2 frame (RFC 9113 section 4.1)."""
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags])
            + stream.to_bytes(4, "big") + payload)


class RawHttp2Client:
    """gRPC calls on a raw HTTP/2 connection that gives the server no flow-control credit
    unless asked (`grant`): the server may send it 65,535 bytes in all and must hold the rest
    of every response, as for a client that stopped reading. It answers the server's SETTINGS
    and PINGs, so the connection stays up, and keeps what each stream received."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.lock = threading.Lock()
        self.next_stream = 1
        self.answered = set()  # Streams the server has sent headers on (a response or a refusal).
        self.ended = set()  # Streams the server has ended (trailers sent).
        self.data = {}  # Stream -> the bytes of its DATA frames so far.
        self._send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + http2_frame(0x4, 0, 0, b""))
        threading.Thread(target=self._read, daemon=True).start()

    def _send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def _read(self):
        try:
            self._read_frames()
        except OSError:
            pass  # Closed.

    def _read_frames(self):
        buffer = b""
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            buffer += data
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length = int.from_bytes(buffer[:3], "big")
                kind, flags, payload = buffer[3], buffer[4], buffer[9:9 + length]
                stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                buffer = buffer[9 + length:]
                if kind == 0x0:  # DATA.
                    self.data[stream] = self.data.get(stream, b"") + payload
                elif kind == 0x1:  # HEADERS.
                    self.answered.add(stream)
                elif kind == 0x4 and not flags & 0x1:  # SETTINGS: acknowledge.
                    self._send(http2_frame(0x4, 0x1, 0, b""))
                elif kind == 0x6 and not flags & 0x1:  # PING: answer.
                    self._send(http2_frame(0x6, 0x1, 0, payload))
                if kind in (0x0, 0x1) and flags & 0x1:  # END_STREAM.
                    self.ended.add(stream)

    def call(self, path, request, metadata=()):
        """Starts a call of `path` (bytes) with `request` and `metadata` ((name, value) bytes
        pairs); returns its stream id."""
        # HPACK "literal without indexing, new name" for every header (names and values
        # shorter than 127 bytes), then the request as one gRPC message.
        headers = b"".join(bytes([0, len(name)]) + name + bytes([len(value)]) + value
                           for name, value in ((b":method", b"POST"), (b":scheme", b"http"),
                                               (b":path", path), (b":authority", b"127.0.0.1"),
                                               (b"content-type", b"application/grpc"),
                                               (b"te", b"trailers"), *metadata))
        body = request.SerializeToString()
        message = b"\0" + len(body).to_bytes(4, "big") + body
        stream = self.next_stream
        self.next_stream += 2
        self._send(http2_frame(0x1, 0x4, stream, headers) + http2_frame(0x0, 0x1, stream, message))
        return stream

    def grant(self, stream, credit):
        """Lets the server send `credit` more bytes on `stream` (and on the connection)."""
        increment = credit.to_bytes(4, "big")
        self._send(http2_frame(0x8, 0, 0, increment) + http2_frame(0x8, 0, stream, increment))

    def messages(self, stream, message_type):
        """The gRPC messages `stream` received whole so far, parsed as `message_type`."""
        data, messages = self.data.get(stream, b""), []
        while len(data) >= 5 and len(data) >= 5 + int.from_bytes(data[1:5], "big"):
            length = int.from_bytes(data[1:5], "big")
            messages.append(message_type.FromString(data[5:5 + length]))
            data = data[5 + length:]
        return messages

    def wait_for(self, condition, what, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)

    def wait_answered(self, count, timeout_s=30.0):
        self.wait_for(lambda: len(self.answered) >= count, f"{count} calls answered", timeout_s)

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
