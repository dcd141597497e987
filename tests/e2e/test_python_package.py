"""The Python client as a student installs it: pip from the server's own web endpoint into a
fresh virtual environment, no repository on the path, then the examples against the real
server (issue 16).

The virtual environments see Debian's grpcio and protobuf (--system-site-packages: no PyPI
here), which is what pip would fetch elsewhere; pip runs with --no-index, so nothing but the
server is asked for anything.
"""

import math
import os
import re
import shutil
import subprocess
import urllib.request

import pytest
from google.protobuf import descriptor_pb2

from conftest import REPO_ROOT, running_server

EXAMPLES = REPO_ROOT / "client" / "python" / "examples"
PROTO = REPO_ROOT / "proto" / "pitlane" / "v1" / "simulator.proto"
VERSION = re.search(r'^version = "([^"]+)"$',
                    (REPO_ROOT / "client" / "python" / "pyproject.toml").read_text(),
                    re.M).group(1)
WHEEL = f"pitlane_client-{VERSION}-py3-none-any.whl"
SDIST = f"pitlane-client-{VERSION}.tar.gz"


@pytest.fixture(scope="module")
def server():
    with running_server("--http_listen=127.0.0.1:0") as srv:
        yield srv


def venv(path):
    """A fresh virtual environment of /usr/bin/python3 that sees Debian's packages; returns
    its python."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(path)],
                   check=True)
    return path / "bin" / "python"


def clean_env():
    """The environment without PYTHONPATH (the tests put client/python on it)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def pip_install(python, url, *extra):
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--quiet",
                           *extra, url], capture_output=True, text=True, env=clean_env(),
                          check=False)
    assert done.returncode == 0, done.stderr


def run_in(python, cwd, *args):
    done = subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True,
                          env=clean_env(), timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_server_serves_the_wheel_and_its_page(server):
    base = f"http://{server.http_address()}"
    assert any(f"Client:  pip install {base}/python/{WHEEL}" in line for line in server.output)
    with urllib.request.urlopen(f"{base}/python/", timeout=10) as page:
        body = page.read().decode()
    assert page.status == 200 and f'href="{WHEEL}"' in body and f'href="{SDIST}"' in body
    with urllib.request.urlopen(f"{base}/python/{WHEEL}", timeout=10) as response:
        assert response.headers["Content-Type"] == "application/zip"
        assert response.read()[:4] == b"PK\x03\x04"  # A zip archive.


def test_the_served_wheel_installs_and_the_examples_run(server, tmp_path):
    python = venv(tmp_path / "venv")
    pip_install(python, f"http://{server.http_address()}/python/{WHEEL}")
    # Outside the repository, the examples copied alone: pitlane comes from the wheel.
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES, work)
    where = run_in(python, work, "-c", "import pitlane; print(pitlane.__file__)")
    assert str(tmp_path / "venv") in where and str(REPO_ROOT) not in where

    # The generated modules inside are the proto's: the same file descriptor protoc makes.
    out = run_in(python, work, "-c",
                 "import sys; from pitlane.v1 import simulator_pb2 as m; "
                 "sys.stdout.write(m.DESCRIPTOR.serialized_pb.hex())")
    shipped = descriptor_pb2.FileDescriptorProto.FromString(bytes.fromhex(out))
    made = tmp_path / "descriptor.pb"
    subprocess.run(["protoc", f"-I{REPO_ROOT / 'proto'}", f"--descriptor_set_out={made}",
                    str(PROTO)], check=True)
    expected = descriptor_pb2.FileDescriptorSet.FromString(made.read_bytes()).file[0]
    # Python's generated code leaves out json_name, which follows from the field's name.
    messages = list(expected.message_type)
    while messages:
        message = messages.pop()
        for field in message.field:
            field.ClearField("json_name")
        messages.extend(message.nested_type)
    assert expected == shipped

    # The examples, against the real server.
    circle = run_in(python, work, "circle.py", "--address", server.address, "--ticks", "500")
    fitted, expected = map(float, re.search(r"fitted radius ([\d.]+) m, L / tan\(steer\) = "
                                            r"([\d.]+) m", circle).groups())
    assert fitted == pytest.approx(expected, rel=1e-3)
    assert expected == pytest.approx(2.7 / math.tan(0.2), rel=1e-6)
    drove = run_in(python, work, "controller.py", "--address", server.address, "--clock",
                   "lockstep", "--seconds", "2")
    assert "clock=lockstep" in drove


def test_the_sdist_builds_and_installs_without_protoc(server, tmp_path):
    python = venv(tmp_path / "venv")
    # Only the environment's own bin/ on the path, so no protoc: the generated modules come
    # inside the sdist. setuptools (Debian's) builds it.
    path = str(tmp_path / "venv" / "bin")
    assert shutil.which("protoc", path=path) is None
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation", "--quiet",
         f"http://{server.http_address()}/python/{SDIST}"],
        capture_output=True, text=True, env=dict(clean_env(), PATH=path), check=False)
    assert done.returncode == 0, done.stderr
    out = run_in(python, tmp_path, "-c",
                 "import pitlane; c = pitlane.Client(%r); "
                 "s = c.create_session(name='sdist').session_id; "
                 "print(c.step(s, ticks=5).time.tick)" % server.address)
    assert out.strip() == "5"

