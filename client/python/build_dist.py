"""Builds the pitlane-client distributions: a wheel and an sdist that install anywhere with pip
(grpcio and protobuf from pip or the OS; no protoc, no CMake), the generated pitlane.v1 modules
inside, generated here from the proto. Also writes index.html, the page the server shows at
/python/ with the pip command. Run by the build (client/CMakeLists.txt):

    /usr/bin/python3 client/python/build_dist.py --proto proto/pitlane/v1/simulator.proto \\
        --proto-root proto --source client/python --out build/python/dist

Only Debian's python3-setuptools and python3-wheel are used (their PEP 517 hooks, called
directly: nothing is downloaded).
"""

import argparse
import html
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile



def copy_sources(source, staging):
    """The package's own files: pyproject, README, pitlane/ without generated or cached
    files."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(source / name, staging / name)
    shutil.copytree(source / "pitlane", staging / "pitlane",
                    ignore=shutil.ignore_patterns("v1", "__pycache__", "*.pyc"))


def generate(proto, proto_root, staging, protoc, grpc_plugin):
    subprocess.run(
        [protoc, f"-I{proto_root}", f"--python_out={staging}", f"--pyi_out={staging}",
         f"--grpc_out={staging}", f"--plugin=protoc-gen-grpc={grpc_plugin}", str(proto)],
        check=True)
    (staging / "pitlane" / "v1" / "__init__.py").write_text(
        '"""Generated from proto/pitlane/v1/simulator.proto by protoc (build_dist.py)."""\n')


def build(staging, out):
    """The sdist and the wheel, by setuptools' PEP 517 hooks in a child process."""
    names = staging / "built.txt"
    # (setuptools rewrites sys.argv while it builds: the arguments are read first.)
    code = ("import sys\nfrom setuptools import build_meta as b\n"
            "out, names = sys.argv[1:3]\n"
            "built = [b.build_sdist(out), b.build_wheel(out)]\n"
            "open(names, 'w').write('\\n'.join(built))\n")
    # The wheel's file times from a fixed date (wheel honours it; the sdist keeps build times).
    env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1767225600"))
    done = subprocess.run([sys.executable, "-c", code, str(out), str(names)], cwd=staging,
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"build_dist: setuptools failed:\n{done.stdout}\n{done.stderr}")
    sdist, wheel = names.read_text().split("\n")
    return sdist, wheel


def index_page(sdist, wheel):
    wheel_e, sdist_e = html.escape(wheel), html.escape(sdist)
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Pitlane's Python client</title></head>
<body>
<h1>Pitlane's Python client</h1>
<p>Install it with pip (Python 3.9 or newer; pip fetches grpcio and protobuf), giving the
address you opened this page with:</p>
<pre>pip install http://SERVER:8080/python/{wheel_e}</pre>
<p>Files: <a href="{wheel_e}">{wheel_e}</a> (wheel), <a href="{sdist_e}">{sdist_e}</a>
(source).</p>
<p>Then: <code>import pitlane; client = pitlane.Client("SERVER:50051", token=...)</code>.</p>
</body>
</html>
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proto", required=True, type=pathlib.Path)
    parser.add_argument("--proto-root", required=True, type=pathlib.Path)
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--protoc", default="protoc")
    parser.add_argument("--grpc-plugin", default="/usr/bin/grpc_python_plugin")
    # The names the build expects (setuptools' own naming of sdists changed with PEP 625).
    parser.add_argument("--wheel-name")
    parser.add_argument("--sdist-name")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("pitlane_client-*"), *out.glob("pitlane-client-*")]:
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="pitlane-dist-") as tmp:
        staging = pathlib.Path(tmp)
        copy_sources(args.source.resolve(), staging)
        generate(args.proto.resolve(), args.proto_root.resolve(), staging, args.protoc,
                 args.grpc_plugin)
        sdist, wheel = build(staging, out)
    for built, wanted in ((sdist, args.sdist_name), (wheel, args.wheel_name)):
        if wanted and built != wanted:
            (out / built).rename(out / wanted)
    sdist, wheel = args.sdist_name or sdist, args.wheel_name or wheel
    (out / "index.html").write_text(index_page(sdist, wheel))
    print(f"build_dist: {out / wheel}, {out / sdist}")


if __name__ == "__main__":
    main()
