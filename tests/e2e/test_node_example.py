"""The Node.js example (client/node/controller.mjs, @grpc/grpc-js and @grpc/proto-loader from
npm) drives a car through Drive against the real server (issue 16)."""

import json
import subprocess

import pytest

from conftest import REPO_ROOT, running_token_server

CONTROLLER = REPO_ROOT / "client" / "node" / "controller.mjs"


def run_controller(address, *extra):
    return subprocess.run(["node", str(CONTROLLER), "--address", address, "--seconds", "2",
                           *extra], capture_output=True, text=True, timeout=60, check=False)


def test_the_node_controller_drives_a_barrier_session(address):
    done = run_controller(address)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ticks"] == 100 and result["final_tick"] == 100
    # Speed under a proportional controller, one tick behind its observation:
    # v_n = V (1 - (1 - K dt)^n), V = 5 m/s, K = 0.5 /s, dt = 0.02 s.
    assert result["speed_mps"] == pytest.approx(5.0 * (1 - (1 - 0.5 * 0.02) ** 100), rel=1e-9)


def test_the_node_controller_with_a_token(tmp_path):
    with running_token_server(tmp_path) as (server, _, token_file):
        refused = run_controller(server.address)
        assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
        done = run_controller(server.address, "--token-file", str(token_file))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["ticks"] == 100
