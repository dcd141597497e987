"""The cost of the front door: a unary call to one server directly and through nginx
configured by docker/nginx/make-config.sh, side by side in one run (docs/benchmarks.md).

    /usr/bin/python3 bench/front_bench.py [--calls 2000] [--rounds 3]

Starts its own server (build/bin/pitlane-server, --replica=r1) and nginx on free loopback
ports; prints the median latency of GetState and Step (one car) per round and over rounds.
"""
import argparse
import pathlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "client" / "python"))
import pitlane  # pylint: disable=wrong-import-position


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def bench(address, calls):
    with pitlane.Client(address) as client:
        sid = client.create_session(name="front-bench").session_id
        client.spawn_vehicle(sid)
        for _ in range(200):  # Warm up the connection and the session.
            client.step(sid)
        medians = {}
        for name, call in (("GetState", lambda: client.get_state(sid)),
                           ("Step", lambda: client.step(sid))):
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            medians[name] = statistics.median(times) * 1e6
        client.delete_session(sid)
        return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="front-bench-"))
    server = subprocess.Popen(
        [str(REPO / "build" / "bin" / "pitlane-server"), "--listen=127.0.0.1:0",
         "--http_listen=127.0.0.1:0", "--replica=r1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    banner = "".join(server.stdout.readline() for _ in range(7))
    grpc_address = re.search(r"listening on (\S+)", banner).group(1)
    http_address = re.search(r"HTTP: +http://(\S+)/metrics", banner).group(1)
    grpc_port, http_port = free_ports(2)
    config = subprocess.run(
        [str(REPO / "docker" / "nginx" / "make-config.sh"), "--grpc-listen",
         f"127.0.0.1:{grpc_port}", "--http-listen", f"127.0.0.1:{http_port}", "--access-log",
         "off", "--error-log", str(tmp / "error.log"), f"r1={grpc_address},{http_address}"],
        capture_output=True, text=True, check=True).stdout
    (tmp / "pitlane.conf").write_text(config)
    (tmp / "nginx.conf").write_text(
        f"daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/error.log;\n"
        f"events {{}}\nhttp {{ access_log off; client_body_temp_path {tmp}/body; "
        f"proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fastcgi; "
        f"uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi; "
        f"include {tmp}/pitlane.conf; }}\n")
    nginx = subprocess.Popen(["nginx", "-p", str(tmp), "-c", str(tmp / "nginx.conf"),
                              "-e", str(tmp / "error.log")])
    time.sleep(0.5)
    try:
        results = {}
        for _ in range(args.rounds):  # Alternating, so that both see the same machine.
            for label, address in (("direct", grpc_address),
                                   ("through nginx", f"127.0.0.1:{grpc_port}")):
                for name, median in bench(address, args.calls).items():
                    results.setdefault((name, label), []).append(median)
        for (name, label), medians in sorted(results.items()):
            print(f"{name:9s} {label:14s} rounds {[round(m, 1) for m in medians]} us, "
                  f"median {statistics.median(medians):.1f} us")
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
