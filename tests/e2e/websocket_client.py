"""A small WebSocket client (RFC 6455) for the tests: the handshake, masked text frames out,
frames in. Enough to speak Foxglove's protocol to the server, and to misbehave on purpose
(never read, send garbage)."""

import base64
import hashlib
import json
import os
import socket
import struct

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class HandshakeError(Exception):
    def __init__(self, status, headers, body):
        super().__init__(f"handshake refused: {status}")
        self.status = status
        self.headers = headers
        self.body = body


class WebSocket:
    def __init__(self, address, path="/foxglove", protocols=("foxglove.websocket.v1",),
                 headers=(), timeout=10.0, receive_buffer=None, key=None):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        key = key or base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {address}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13"]
        if protocols:
            lines.append("Sec-WebSocket-Protocol: " + ", ".join(protocols))
        lines += list(headers)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
        self.headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if self.status != 101:
            body = self.buffer
            try:
                while True:
                    chunk = self.sock.recv(4096)
                    if not chunk:
                        break
                    body += chunk
            except OSError:
                pass
            self.sock.close()
            raise HandshakeError(self.status, self.headers, body.decode("utf-8", "replace"))
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        assert self.headers.get("sec-websocket-accept") == accept
        self.protocol = self.headers.get("sec-websocket-protocol")

    def send_frame(self, opcode, payload, fin=True):
        header = bytes([(0x80 if fin else 0) | opcode])
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self.send_frame(0x1, text.encode())

    def send_json(self, value):
        self.send_text(json.dumps(value))

    def _read_exact(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("closed by the server")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self):
        """(opcode, payload) of the next frame (pings are answered and skipped)."""
        while True:
            b0, b1 = self._read_exact(2)
            opcode = b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read_exact(8))[0]
            payload = self._read_exact(n)
            if opcode == 0x9:
                self.send_frame(0xA, payload)
                continue
            return opcode, payload

    def receive_json(self):
        """The next text message, parsed (binary messages in between are skipped)."""
        while True:
            opcode, payload = self.receive()
            if opcode == 0x1:
                return json.loads(payload)
            if opcode == 0x8:
                raise ConnectionError(f"closed: {payload!r}")

    def close(self):
        try:
            self.send_frame(0x8, struct.pack(">H", 1000))
        except OSError:
            pass
        self.sock.close()


def message_data(payload):
    """(subscription id, timestamp ns, data) of a Foxglove Message Data frame."""
    assert payload[0] == 0x01, payload[:1]
    subscription, timestamp = struct.unpack_from("<IQ", payload, 1)
    return subscription, timestamp, payload[13:]
