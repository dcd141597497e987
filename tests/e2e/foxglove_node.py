"""Drives tests/web/foxglove_client.mjs (Foxglove's own client, under Node) from a test: its
events as parsed JSON lines, commands written to it."""

import json
import pathlib
import queue
import shutil
import subprocess
import threading
import time

import pytest

WEB_TESTS = pathlib.Path(__file__).resolve().parents[1] / "web"


def node_path():
    node = shutil.which("node")
    assert node, "node (Debian package nodejs) is installed by scripts/setup.sh"
    assert (WEB_TESTS / "node_modules" / "@foxglove" / "ws-protocol").is_dir(), (
        "tests/web/node_modules is installed by scripts/setup.sh (npm ci)")
    return node


def stop_node(proc, timeout=10):
    """Asks a driver script to close (a {"op": "close"} line), kills it if it does not."""
    if proc.poll() is not None:
        return
    try:
        proc.stdin.write(json.dumps({"op": "close"}) + "\n")
        proc.stdin.flush()
        proc.wait(timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


class NodeDriver:
    """A driver script under Node (self.proc), closed when the `with` block ends."""

    def close(self):
        stop_node(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FoxgloveNode(NodeDriver):
    def __init__(self, url, *protocols):
        self.proc = subprocess.Popen(
            [node_path(), str(WEB_TESTS / "foxglove_client.mjs"), url, *protocols],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=WEB_TESTS)
        self.events = queue.Queue()
        self.seen = []  # Every event, in order.
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def next(self, timeout=10.0):
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no event from the Foxglove client within {timeout} s; stderr:\n"
                        + "".join(self.stderr))
        if event is None:
            pytest.fail("the Foxglove client exited; stderr:\n" + "".join(self.stderr))
        self.seen.append(event)
        return event

    def mark(self):
        """A point in the events seen, for wait_for(since=)."""
        return len(self.seen)

    def wait_for(self, predicate, timeout=10.0, what="an event", since=None):
        """The first event matching `predicate`: among those seen since `since` (a mark), if
        given, else among those to come."""
        if since is not None:
            for event in self.seen[since:]:
                if predicate(event):
                    return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no {what} within {timeout} s; last events:\n"
                            + "\n".join(json.dumps(e)[:300] for e in self.seen[-10:]))
            event = self.next(remaining)
            if predicate(event):
                return event

    def drain(self, seconds):
        """Every event in the next `seconds`."""
        deadline = time.monotonic() + seconds
        events = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return events
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                return events
            if event is None:
                return events
            self.seen.append(event)
            events.append(event)

    def send(self, command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def subscribe(self, *topics):
        self.send({"op": "subscribe", "topics": list(topics)})
        self.wait_for(lambda e: e["event"] == "subscribed", what="subscribed")

    def unsubscribe(self, *topics):
        self.send({"op": "unsubscribe", "topics": list(topics)})
        self.wait_for(lambda e: e["event"] == "unsubscribed", what="unsubscribed")

    def topics(self):
        """Topics advertised and not unadvertised, from the events seen so far."""
        live = {}
        for event in self.seen:
            if event["event"] == "advertise":
                for channel in event["channels"]:
                    live[channel["id"]] = channel
            elif event["event"] == "unadvertise":
                for channel_id in event["channelIds"]:
                    live.pop(channel_id, None)
        return {channel["topic"]: channel for channel in live.values()}
