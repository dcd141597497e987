"""Drives tests/web/browser.mjs (Debian's chromium under puppeteer-core) from a test."""

import json
import pathlib
import shutil
import subprocess

import pytest

from foxglove_node import WEB_TESTS, NodeDriver, node_path

ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


class Browser(NodeDriver):
    def __init__(self):
        chromium = shutil.which("chromium")
        assert chromium, "chromium (Debian package) is installed by scripts/setup.sh"
        assert (WEB_TESTS / "node_modules" / "puppeteer-core").is_dir(), (
            "tests/web/node_modules is installed by scripts/setup.sh (npm ci)")
        self.proc = subprocess.Popen(
            [node_path(), str(WEB_TESTS / "browser.mjs")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=WEB_TESTS,
            env={"CHROMIUM": chromium, "PATH": "/usr/bin:/bin", "HOME": "/tmp"})

    def call(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            pytest.fail("the browser driver exited: " + self.proc.stderr.read())
        answer = json.loads(line)
        if "error" in answer:
            pytest.fail(f"browser: {command['op']}: {answer['error']}; console: {answer.get('console')}")
        return answer

    def open(self, url):
        return self.call(op="open", url=url)

    def eval(self, expr):
        return self.call(op="eval", expr=expr).get("value")  # None for undefined.

    def wait_for(self, expr, timeout_ms=10000):
        self.call(op="waitFor", expr=expr, timeout=timeout_ms)

    def screenshot(self, name):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        self.call(op="screenshot", path=str(path))
        return path
