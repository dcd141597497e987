"""Fixtures for the end-to-end tests: the real server binary and clients.

Run from the repository root with ``/usr/bin/python3 -m pytest tests/e2e``.
The server binary is $PITLANE_SERVER, default build/bin/pitlane-server.
"""

import contextlib
import importlib
import os
import pathlib
import queue
import re
import resource
import signal
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

    def __init__(self, *flags, address_space_bytes=None):
        if not SERVER.is_file():
            pytest.fail(f"server binary not found: {SERVER} (build it or set PITLANE_SERVER)")
        self.output = []  # Lines of stdout and stderr, interleaved, prefixed.
        self._stdout_lines = queue.Queue()
        self.proc = subprocess.Popen(
            [str(SERVER), "--listen=127.0.0.1:0", *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # As `ulimit -v`: allocations beyond fail in the server (std::bad_alloc).
            preexec_fn=None if address_space_bytes is None else lambda: resource.setrlimit(
                resource.RLIMIT_AS, (address_space_bytes, address_space_bytes)),
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

    def startup_session_id(self):
        """The id of the session started with --scenario, read from the banner that names it
        (printed just after the address, so it may still be on its way through the pipe)."""
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in list(self.output):
                match = _STARTUP_SESSION.search(line)
                if match:
                    return match.group(1)
            time.sleep(0.05)
        pytest.fail("no 'Scenario ... is running as session <id>' line; output:\n"
                    + "\n".join(self.output))

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

