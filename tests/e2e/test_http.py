"""The HTTP endpoint through the real server binary: /healthz, /readyz and /metrics, checked by
Prometheus's own `promtool check metrics`, the counters moving as calls are made, and who may
read the metrics."""

import json
import pathlib
import re
import shutil
import subprocess
import urllib.error
import urllib.request

import grpc
import pytest

import pitlane
from conftest import SERVER, running_server
from test_access import new_token

HTTP = "--http_listen=127.0.0.1:0"


def get(url, token=None, method="GET"):
    """(status, headers, body) of one request."""
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def samples(text):
    """{'name{labels}': value} of a metrics page."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
    return values


def promtool_check(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by scripts/setup.sh"
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_health_readiness_and_unknown_paths():
    with running_server(HTTP) as server:
        base = f"http://{server.http_address()}"
        assert get(f"{base}/healthz")[::2] == (200, "ok\n")
        assert get(f"{base}/readyz")[::2] == (200, "ready\n")
        status, headers, body = get(f"{base}/healthz", method="HEAD")
        assert (status, body) == (200, "")
        assert get(f"{base}/nothing")[0] == 404
        assert get(f"{base}/../etc/passwd")[0] == 404
        status, headers, _ = get(f"{base}/metrics", method="POST")
        assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_metrics_pass_promtool_and_move_as_the_server_works():
    with running_server(HTTP) as server:
        url = f"http://{server.http_address()}/metrics"
        status, headers, before = get(url)
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        promtool_check(before)
        with pitlane.Client(server.address) as client:
            sid = client.create_session(name="counted").session_id
            client.spawn_vehicles(sid, [pitlane.vehicle_spec(x_m=10.0 * i) for i in range(3)])
            client.step(sid, 10)
            with pytest.raises(grpc.RpcError):
                client.step("s-nosuchsession", 1)
            stream = client.drive(sid, 1)
            stream.observe()
            after = get(url)[2]
            stream.close()
        promtool_check(after)
        b, a = samples(before), samples(after)
        assert a["pitlane_ticks_total"] - b["pitlane_ticks_total"] >= 10
        assert a["pitlane_tick_duration_seconds_count"] >= 10
        assert a['pitlane_sessions{clock_mode="lockstep"}'] == 1
        assert a["pitlane_vehicles"] == 3
        assert a["pitlane_controllers"] == 1
        assert a['pitlane_rpcs_total{method="Step",code="OK"}'] == 1
        assert a['pitlane_rpcs_total{method="Step",code="NOT_FOUND"}'] == 1
        assert a['pitlane_rpcs_total{method="CreateSession",code="OK"}'] == 1
        # Bounded labels: one series per method and code, never per session or vehicle.
        assert not re.search(r"s-[a-z2-7]{26}", after)


def test_with_tokens_metrics_need_the_admin_token_unless_on_their_own_address(tmp_path):
    admin = new_token()
    (tmp_path / "admin.token").write_text(admin)
    with running_server(HTTP, "--auth=token", f"--admin_token_file={tmp_path / 'admin.token'}",
                        "--metrics_listen=127.0.0.1:0") as server:
        url = f"http://{server.http_address()}/metrics"
        with pitlane.Client(server.address, token=admin) as client:
            sid = client.create_session(name="class").session_id
            owner = client.owner_tokens[sid][0]
        for token in (None, "not-a-token", new_token(), owner):
            status, headers, body = get(url, token)
            assert status == 401, (token, status)
            assert headers["WWW-Authenticate"].startswith("Bearer")
            assert "pitlane_" not in body
        status, _, body = get(url, admin)
        assert status == 200 and "pitlane_ticks_total" in body
        # Health needs no token (load balancers, container probes).
        assert get(f"http://{server.http_address()}/healthz")[0] == 200
        # The metrics-only address: /metrics without a token, nothing else.
        status, _, body = get(f"http://{server.metrics_address()}/metrics")
        assert status == 200 and "pitlane_ticks_total" in body
        assert get(f"http://{server.metrics_address()}/healthz")[0] == 404
        assert admin not in "\n".join(server.output)


@pytest.mark.parametrize("flag, message", [
    ("--http_listen=8080", "--http_listen: must be host:port"),
    ("--http_listen=127.0.0.1:99999", "--http_listen: must be host:port"),
    ("--metrics_listen=[::1", "--metrics_listen: must be host:port"),
    # civetweb's own syntax would mean something else: all interfaces, a list, TLS.
    ("--http_listen=19090,127.0.0.1:0", "--http_listen: must be an IPv4 address and a port"),
    ("--http_listen=+127.0.0.1:0", "--http_listen: must be an IPv4 address and a port"),
    ("--http_listen=[::1]:0", "--http_listen: must be an IPv4 address and a port"),
    ("--http_listen=localhost:8080", "--http_listen: must be an IPv4 address and a port"),
    ("--http_listen=127.0.0.256:8080", "--http_listen: must be an IPv4 address and a port"),
])
def test_bad_http_addresses_exit_2_naming_the_flag(flag, message):
    result = subprocess.run([str(SERVER), "--listen=127.0.0.1:0", flag], capture_output=True,
                            text=True, timeout=20)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_a_busy_http_port_is_an_error():
    with running_server(HTTP) as first:
        taken = first.http_address()
        result = subprocess.run([str(SERVER), "--listen=127.0.0.1:0", f"--http_listen={taken}"],
                                capture_output=True, text=True, timeout=20)
        assert result.returncode == 1, result.stderr
        assert f'--http_listen: cannot serve HTTP on "{taken}"' in result.stderr, result.stderr


DASHBOARDS = pathlib.Path(__file__).resolve().parents[2] / "dashboards"


def test_shipped_prometheus_config_and_grafana_queries_pass_promtool(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is installed by scripts/setup.sh"
    result = subprocess.run([promtool, "check", "config", str(DASHBOARDS / "prometheus.yml")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every query of the Grafana dashboard, as a recording rule: promtool parses the PromQL.
    dashboard = json.loads((DASHBOARDS / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(exprs) >= 8
    rules = {"groups": [{"name": "grafana", "rules": [
        {"record": f"pitlane:query_{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}
    (tmp_path / "rules.yml").write_text(json.dumps(rules))  # JSON is YAML.
    result = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    # And every metric they name is one the server serves (calls appear with the first).
    with running_server(HTTP) as server, pitlane.Client(server.address) as client:
        client.list_sessions()
        page = get(f"http://{server.http_address()}/metrics")[2]
    served = {line.split()[2] for line in page.splitlines() if line.startswith("# TYPE")}
    for expr in exprs:
        for name in re.findall(r"pitlane_[a-z_]+", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in served, (name, expr)
