"""Scale-out: three real servers (--replica r1, r2, r3) behind Debian's nginx on loopback
ports, configured by docker/nginx/make-config.sh (docs/deployment.md).

Sessions created through the front door spread over the replicas; every later call and stream
of a session (unary calls, Step, StreamStates, Drive, the viewer's API and WebSocket) reaches
the replica that holds it, so each session's state moves only by its own calls; a replica
killed fails its own sessions' calls with UNAVAILABLE while the others, and new sessions, carry
on."""

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest
import yaml

import pitlane
from conftest import REPO_ROOT, ServerProcess, assert_rpc_error
from websocket_client import WebSocket

REPLICAS = ("r1", "r2", "r3")
MAKE_CONFIG = REPO_ROOT / "docker" / "nginx" / "make-config.sh"
SESSIONS = 30


def free_ports(n):
    """n distinct free loopback ports (all held while they are chosen)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def wait_for_port(port, proc, log, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"nginx exited with {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"nginx did not listen on {port}:\n{log.read_text()}")


class Deployment:
    def __init__(self, tmp, tls=None):
        self.servers = {}
        self.killed = set()
        self.nginx = None
        try:
            self._start(tmp, tls)
        except BaseException:
            self.stop(check=False)
            raise

    def _start(self, tmp, tls):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(nginx):
            pytest.fail("nginx is not installed: run scripts/setup.sh (apt nginx-light)")
        for name in REPLICAS:
            self.servers[name] = ServerProcess(f"--replica={name}", "--http_listen=127.0.0.1:0")
        self.grpc_port, self.http_port = free_ports(2)
        replicas = [f"{name}={server.address},{server.http_address()}"
                    for name, server in self.servers.items()]
        self.access_log = tmp / "access.log"
        self.http_error_log = tmp / "http-error.log"
        tls_args = [] if tls is None else ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
        config = subprocess.run(
            [str(MAKE_CONFIG), "--grpc-listen", f"127.0.0.1:{self.grpc_port}",
             "--http-listen", f"127.0.0.1:{self.http_port}", "--access-log",
             str(self.access_log), "--error-log", str(self.http_error_log), *tls_args,
             *replicas],
            check=True, capture_output=True, text=True).stdout
        (tmp / "pitlane.conf").write_text(config)
        # nginx's own settings for a process of the test's: files under tmp, one worker.
        (tmp / "nginx.conf").write_text(f"""
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/pitlane.conf;
}}
""")
        self.log = tmp / "error.log"
        self.log.touch()
        self.nginx = subprocess.Popen(
            [nginx, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(self.log)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for_port(self.grpc_port, self.nginx, self.log)
        wait_for_port(self.http_port, self.nginx, self.log)
        self.front = f"127.0.0.1:{self.grpc_port}"
        self.web = f"http://127.0.0.1:{self.http_port}"

    def direct(self, name):
        return pitlane.Client(self.servers[name].address, timeout_s=10.0)

    def kill(self, name):
        self.servers[name].proc.send_signal(signal.SIGKILL)
        self.servers[name].proc.wait(timeout=10)
        self.killed.add(name)

    def stop(self, check=True):
        """Stops nginx and the servers; checks that every server not killed exited 0."""
        if self.nginx is not None:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()
        codes = {name: server.stop() for name, server in self.servers.items()}
        if check:
            assert all(code == 0 for name, code in codes.items()
                       if name not in self.killed), codes


@pytest.fixture
def deployment(tmp_path):
    d = Deployment(tmp_path)
    try:
        yield d
    finally:
        d.stop()


def replica_of(session_id):
    return session_id.rsplit(".", 1)[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def post_json(url):
    request = urllib.request.Request(url, method="POST")
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.load(response)


def test_every_call_and_stream_of_a_session_reaches_its_replica(deployment):
    with pitlane.Client(deployment.front, timeout_s=10.0) as front:
        ids = [front.create_session(name=f"class-{i}").session_id for i in range(SESSIONS)]
        by_replica = collections.Counter(replica_of(sid) for sid in ids)
        # Spread over all three (least_conn over idle replicas takes turns).
        assert set(by_replica) == set(REPLICAS) and min(by_replica.values()) >= 5, by_replica
        for name in REPLICAS:
            with deployment.direct(name) as direct:
                held = {s.session_id for s in direct.list_sessions()}
            assert held == {sid for sid in ids if replica_of(sid) == name}

        # Unary calls and Steps: session i gets i % 7 + 1 ticks and one vehicle, all through
        # the front door.
        for i, sid in enumerate(ids):
            vehicle = front.spawn_vehicle(sid, x_m=float(i))
            front.set_controls(sid, [pitlane.control(vehicle, acceleration_mps2=1.0)])
            front.step(sid, ticks=i % 7 + 1)
        # Each session moved by its own calls only: its tick is its own count, its state the
        # same through the front door as on its replica.
        for i, sid in enumerate(ids):
            state = front.get_state(sid)
            assert state.time.tick == i % 7 + 1, sid
            assert len(state.vehicles) == 1 and state.vehicles[0].x_m == pytest.approx(i, abs=0.05)
            with deployment.direct(replica_of(sid)) as direct:
                assert direct.state_hash(sid) == front.state_hash(sid)

        # Streams: StreamStates and Drive through the front door, twice on one session per
        # replica (a stream sent to any replica in turn would miss at least one of the two).
        for name in (r for r in REPLICAS for _ in range(2)):
            sid = next(s for s in ids if replica_of(s) == name)
            before = front.get_state(sid).time.tick
            stream = front.stream_states(sid, timeout_s=20.0)
            first = next(stream)
            assert first.state.time.tick == before
            vehicle = front.get_state(sid).vehicles[0].vehicle_id
            with front.drive(sid, vehicle) as driver:
                observation = driver.observe()
                assert observation.time.tick == before
                driver.send(before, acceleration_mps2=0.5)
                front.step(sid, ticks=3)
                assert next(stream).state.time.tick > before
            stream.cancel()
            assert front.get_state(sid).time.tick == before + 3

        # The viewer: its page, API and WebSocket reach the replica the address names.
        for name in REPLICAS:
            sid = next(s for s in ids if replica_of(s) == name)
            # (A token in the query is never logged by the front door.)
            listed = get_json(f"{deployment.web}/api/sessions?session={sid}&token=plt_unlogged")
            assert {s["id"] for s in listed["sessions"]} == {
                s for s in ids if replica_of(s) == name}
            tick = front.get_state(sid).time.tick
            stepped = post_json(f"{deployment.web}/api/sessions/{sid}/step?ticks=2")
            assert stepped["tick"] == tick + 2
            with urllib.request.urlopen(f"{deployment.web}/?session={sid}", timeout=10) as page:
                assert page.status == 200 and b"<canvas" in page.read()
            ws = WebSocket(f"127.0.0.1:{deployment.http_port}",
                           path=f"/foxglove?viewer=1&session={sid}")
            try:
                topics = set()
                while f"/{sid}/viewer" not in topics:
                    message = ws.receive_json()
                    if message.get("op") == "advertise":
                        topics |= {c["topic"] for c in message["channels"]}
                assert all(replica_of(t.split("/")[1]) == name for t in topics
                           if t.startswith("/s-")), topics
            finally:
                ws.close()
        # A replica chosen by name: ListSessions and the viewer's list of that replica.
        with pitlane.Client(deployment.front, timeout_s=10.0, replica="r2") as to_r2:
            assert {s.session_id for s in to_r2.list_sessions()} == {
                s for s in ids if replica_of(s) == "r2"}
            assert replica_of(to_r2.create_session(name="on-r2").session_id) == "r2"
        listed = get_json(f"{deployment.web}/api/sessions?replica=r3")
        assert {replica_of(s["id"]) for s in listed["sessions"]} == {"r3"}
        # Without a key, one client's HTTP requests stay on one replica.
        lists = [{s["id"] for s in get_json(f"{deployment.web}/api/sessions")["sessions"]}
                 for _ in range(6)]
        assert all(listed == lists[0] for listed in lists) and lists[0], lists
    log = deployment.access_log.read_text()
    assert "/api/sessions" in log and "plt_unlogged" not in log


def test_a_dead_replica_fails_its_sessions_cleanly_while_the_others_carry_on(deployment):
    with pitlane.Client(deployment.front, timeout_s=10.0) as front:
        ids = [front.create_session(name=f"k-{i}").session_id for i in range(9)]
        assert {replica_of(sid) for sid in ids} == set(REPLICAS)
        deployment.kill("r2")
        for sid in ids:
            if replica_of(sid) == "r2":
                assert_rpc_error(lambda: front.step(sid, ticks=1),
                                 grpc.StatusCode.UNAVAILABLE)
                assert_rpc_error(lambda: next(front.stream_states(sid, timeout_s=5.0)),
                                 grpc.StatusCode.UNAVAILABLE)
                # The viewer's API of a dead replica: 502, and its token in no log.
                with pytest.raises(urllib.error.HTTPError) as dead:
                    get_json(f"{deployment.web}/api/sessions?session={sid}&token=plt_secret")
                assert dead.value.code == 502
            else:
                tick = front.get_state(sid).time.tick
                front.step(sid, ticks=2)
                assert front.get_state(sid).time.tick == tick + 2
        # New sessions go to the live replicas.
        fresh = [front.create_session(name=f"after-{i}").session_id for i in range(6)]
        assert {replica_of(sid) for sid in fresh} == {"r1", "r3"}
        for sid in fresh:
            front.step(sid, ticks=1)
    for log in (deployment.access_log, deployment.http_error_log, deployment.log):
        assert "plt_secret" not in (log.read_text() if log.exists() else ""), log


def test_the_front_door_serves_tls(tmp_path):
    """make-config.sh --tls-cert/--tls-key: gRPC over TLS through the front, to plaintext
    replicas."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=front", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                    "front.key", "-out", "front.crt"],
                   cwd=tmp_path, check=True, capture_output=True)
    d = Deployment(tmp_path, tls=(tmp_path / "front.crt", tmp_path / "front.key"))
    try:
        ca = (tmp_path / "front.crt").read_bytes()
        with pitlane.Client(d.front, timeout_s=10.0, root_certificates=ca) as front:
            sid = front.create_session(name="tls").session_id
            assert front.step(sid, ticks=3).time.tick == 3
        with pitlane.Client(d.front, timeout_s=5.0) as plaintext:  # Refused in clear.
            assert_rpc_error(plaintext.list_sessions, grpc.StatusCode.UNAVAILABLE)
    finally:
        d.stop()


def generated_by(text):
    """The make-config.sh command line a generated configuration names in its first lines."""
    line = text.splitlines()[1]
    assert line.startswith("#   docker/nginx/make-config.sh "), line
    return line[len("#   docker/nginx/make-config.sh "):].split()


def test_the_shipped_front_door_configurations_are_the_generators_output():
    """docker/nginx/compose.conf and the Kubernetes ConfigMap are make-config.sh's output for
    the command they name, and the files compose.yaml mounts exist."""
    compose_conf = (REPO_ROOT / "docker" / "nginx" / "compose.conf").read_text()
    manifests = list(yaml.safe_load_all(
        (REPO_ROOT / "docker" / "kubernetes" / "pitlane.yaml").read_text()))
    config_map = next(m for m in manifests if m["kind"] == "ConfigMap")
    for text in (compose_conf, config_map["data"]["default.conf"]):
        again = subprocess.run([str(MAKE_CONFIG), *generated_by(text)], check=True,
                               capture_output=True, text=True).stdout
        assert again == text
    statefulset = next(m for m in manifests if m["kind"] == "StatefulSet")
    replicas = statefulset["spec"]["replicas"]
    # The root file system is read-only: the recordings' directory is a volume (else the server
    # cannot write there and refuses to start).
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[env["PITLANE_RECORD_DIR"]] in {
        t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]}
    assert generated_by(config_map["data"]["default.conf"]) == [
        f"pitlane-{i}=pitlane-{i}:50051,pitlane-{i}:8080" for i in range(replicas)]
    assert {m["metadata"]["name"] for m in manifests if m["kind"] == "Service"} >= {
        f"pitlane-{i}" for i in range(replicas)}

    compose = yaml.safe_load((REPO_ROOT / "docker" / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("$"):
                continue  # A variable's default: checked below.
            if source in compose.get("volumes", {}):
                continue  # A named volume (the recordings).
            assert (REPO_ROOT / "docker" / source).exists(), (name, source)
    assert (REPO_ROOT / "scenarios").is_dir()
    # Compose's own validator (no daemon needed), with every profile, and with the classroom
    # example's environment.
    for extra in ([], ["--env-file", str(REPO_ROOT / "docker" / "classroom" / ".env")]):
        checked = subprocess.run(
            ["docker-compose", "-f", str(REPO_ROOT / "docker" / "compose.yaml"), *extra,
             "--profile", "viz", "--profile", "metrics", "--profile", "scale", "config"],
            capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr
        resolved = yaml.safe_load(checked.stdout)
        assert set(resolved["services"]) == {"pitlane", "lichtblick", "prometheus", "grafana",
                                             "pitlane-r2", "pitlane-r3", "front"}
    replicas = [s["environment"]["PITLANE_REPLICA"] for s in compose["services"].values()
                if "PITLANE_REPLICA" in s.get("environment", {})]
    assert generated_by(compose_conf) == [
        f"{r}={h}:50051,{h}:8080" for r, h in zip(replicas, ("pitlane", "pitlane-r2",
                                                              "pitlane-r3"))]


@pytest.mark.parametrize("args, message", [
    ([], "name at least one replica"),
    (["r1"], '"r1" must be NAME=GRPC_HOST:PORT,HTTP_HOST:PORT'),
    (["r1=a:1"], '"r1=a:1" must be NAME=GRPC_HOST:PORT,HTTP_HOST:PORT'),
    (["R1=a:1,b:2"], '"R1" is not a replica name'),
    (["default=a:1,b:2"], '"default" is a word of nginx\'s map'),
    (["r1=a:1,b:2", "r1=c:3,d:4"], 'replica "r1" is named twice'),
    (["--tls-cert", "c.pem", "r1=a:1,b:2"], "--tls-cert and --tls-key go together"),
    (["--grpc-listen"], "--grpc-listen needs a value"),
    (["--port", "1"], "unknown option --port"),
])
def test_make_config_refuses_what_nginx_could_not_use(args, message):
    done = subprocess.run([str(MAKE_CONFIG), *args], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2 and message in done.stderr, done.stderr
