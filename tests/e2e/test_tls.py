"""TLS and mutual TLS through the real server binary, with certificates made by openssl at
test time: a CA, a server certificate for 127.0.0.1, a client certificate (docs/security.md
shows the same recipe)."""

import subprocess

import grpc
import pytest

import pitlane
from pitlane.v1 import simulator_pb2 as pb
from conftest import running_server
from test_access import new_token


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=Pitlane test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=pitlane-{name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out",
                f"{name}.crt", cwd=d)
    token = new_token()
    (d / "admin.token").write_text(token)
    return d, token


def tls_flags(d, *extra):
    return ("--auth=token", f"--admin_token_file={d / 'admin.token'}",
            f"--tls_cert_file={d / 'server.crt'}", f"--tls_key_file={d / 'server.key'}", *extra)


def test_the_client_works_over_tls_with_a_token_and_plaintext_is_refused(pki):
    d, token = pki
    ca = (d / "ca.crt").read_bytes()
    with running_server(*tls_flags(d)) as server:
        with pitlane.Client(server.address, token=token, root_certificates=ca) as client:
            sid = client.create_session(name="tls").session_id
            car = client.spawn_vehicle(sid, speed_mps=2.0)
            assert client.step(sid, 5).time.tick == 5
            driver = client.drive(sid, car)  # A stream too.
            assert driver.observe().vehicle.vehicle_id == car
            driver.close()
            stream = client.stub.StreamStates(pb.StreamStatesRequest(session_id=sid), timeout=10)
            assert next(stream).state.time.tick == 5
            stream.cancel()
        # Without the token, over TLS: the server answers, and refuses.
        with pitlane.Client(server.address, root_certificates=ca, timeout_s=5.0) as anonymous:
            with pytest.raises(grpc.RpcError) as err:
                anonymous.list_sessions()
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # Plaintext to a TLS port: no answer at all.
        with pitlane.Client(server.address, token=token, timeout_s=5.0) as plaintext:
            with pytest.raises(grpc.RpcError) as err:
                plaintext.list_sessions()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        # A client that does not trust the server's CA refuses the server.
        with pitlane.Client(server.address, token=token, tls=True, timeout_s=5.0) as untrusting:
            with pytest.raises(grpc.RpcError) as err:
                untrusting.list_sessions()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_refuses_a_client_without_a_certificate(pki):
    d, token = pki
    ca = (d / "ca.crt").read_bytes()
    with running_server(*tls_flags(d, f"--tls_client_ca_file={d / 'ca.crt'}")) as server:
        with pitlane.Client(server.address, token=token, root_certificates=ca,
                            timeout_s=5.0) as no_certificate:
            with pytest.raises(grpc.RpcError) as err:
                no_certificate.list_sessions()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pitlane.Client(server.address, token=token, root_certificates=ca,
                            private_key=(d / "client.key").read_bytes(),
                            certificate_chain=(d / "client.crt").read_bytes()) as client:
            sid = client.create_session(name="mtls").session_id
            assert client.get_session(sid).session_id == sid
        assert token not in "\n".join(server.output)


@pytest.mark.parametrize("flags,message", [
    (("--tls_cert_file=/nonexistent.crt", "--tls_key_file=/nonexistent.key"),
     "--tls_cert_file: cannot read"),
    (("--tls_cert_file=/etc/hostname",), "give both"),
    (("--tls_client_ca_file=/etc/hostname",), "needs --tls_cert_file"),
    (("--auth=none", "--listen=0.0.0.0:0"), "--allow_unauthenticated_remote_access"),
    (("--auth=maybe",), "--auth: must be auto, token or none"),
    (("--admin_token_file=/etc/hostname",), "the admin token must be"),
])
def test_bad_security_flags_exit_2_naming_the_flag(flags, message):
    from conftest import SERVER
    result = subprocess.run([str(SERVER), "--listen=127.0.0.1:0", *flags], capture_output=True,
                            text=True, timeout=20)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("cert,key,client_ca,message", [
    # The key of another certificate.
    ("server.crt", "client.key", None,
     "--tls_key_file: this private key does not belong to the first certificate"),
    # PEM armour around nothing that parses.
    ("corrupt.pem", "server.key", None,
     "--tls_cert_file: no PEM certificate could be read"),
    ("server.crt", "corrupt.pem", None, "--tls_key_file: no PEM private key could be read"),
    ("server.crt", "server.key", "corrupt.pem",
     "--tls_client_ca_file: no PEM certificate could be read"),
    # A certificate where the key should be, and the reverse.
    ("server.key", "server.key", None, "--tls_cert_file: no PEM certificate"),
    ("server.crt", "server.crt", None, "--tls_key_file: no PEM private key"),
])
def test_unusable_tls_files_exit_2_naming_the_flag(pki, cert, key, client_ca, message):
    from conftest import SERVER
    d, _ = pki
    (d / "corrupt.pem").write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n"
                                   "-----END CERTIFICATE-----\n")
    flags = ["--listen=127.0.0.1:0", "--auth=none", f"--tls_cert_file={d / cert}",
             f"--tls_key_file={d / key}"]
    if client_ca:
        flags.append(f"--tls_client_ca_file={d / client_ca}")
    result = subprocess.run([str(SERVER), *flags], capture_output=True, text=True, timeout=20)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


def test_client_certificates_do_not_stand_in_for_tokens_off_loopback(pki):
    # Mutual TLS says who may connect, not what each may do: --auth=none on an address other
    # machines reach still needs the flag that says so.
    from conftest import SERVER
    d, _ = pki
    result = subprocess.run(
        [str(SERVER), "--listen=0.0.0.0:0", "--auth=none", f"--tls_cert_file={d / 'server.crt'}",
         f"--tls_key_file={d / 'server.key'}", f"--tls_client_ca_file={d / 'ca.crt'}"],
        capture_output=True, text=True, timeout=20)
    assert result.returncode == 2, result.stderr
    assert "--allow_unauthenticated_remote_access" in result.stderr, result.stderr


def test_failed_handshakes_cannot_flood_the_log(pki):
    # gRPC writes an ERROR line for every connection whose TLS handshake fails; anyone who can
    # reach the port can open connections, so those lines pass a rate limit (10 a second after
    # a burst of 50) and one line says how many were left out.
    import socket
    import time
    d, _ = pki
    with running_server(*tls_flags(d)) as server:
        host, port = server.address.rsplit(":", 1)
        time.sleep(0.5)  # Start-up lines first, so the count below is the connections' alone.
        before = len(server.output)
        start = time.monotonic()
        for _ in range(1000):
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    sock.recv(64)
                except OSError:
                    pass
        elapsed = time.monotonic() - start
        assert elapsed < 20.0  # Else the bound below would let through most of the lines.
        time.sleep(0.5)
        lines = [line for line in server.output[before:] if "grpc:" in line]
        assert len(lines) <= 50 + 10 * (elapsed + 1.0), "\n".join(lines[-5:])
        # The refusals are not silent: at least the burst got through.
        assert any("handshake" in line.lower() for line in lines), "\n".join(lines[-5:])
