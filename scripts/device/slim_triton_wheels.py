"""Slim the Triton wheels so that they travel to the GPU machine (64 MiB per device call).

    python scripts/device/slim_triton_wheels.py WHEELS_DIR --python 3.12

rewrites, in place, the ``nvidia_pytriton`` and ``tritonclient`` wheels found in WHEELS_DIR,
keeping what ``livecam engines serve`` and the gRPC client use on a machine with that Python:

- nvidia-pytriton 0.7.0 (55.4 MB): the Python-backend stubs of the other Python versions and
  the bundled ``libpython3.13`` go (the stub runs on the serving interpreter's own libpython,
  see ``livecam/engines/triton_server.py``; nothing else links the bundled one): ~39.5 MB.
- tritonclient 2.51.0 (14.0 MB): its ``perf_analyzer``/``perf_client`` binaries go: 0.1 MB.

Each wheel's RECORD loses the rows of the files dropped, so ``pip install`` takes it as any
wheel. The tritonserver, its libraries and the Python backend are kept byte for byte.
"""

from __future__ import annotations

import argparse
import re
import zipfile
from pathlib import Path


def dropped(name: str, python: str) -> bool:
    """Whether wheel member ``name`` is left out for Python ``python`` (e.g. "3.12")."""
    stub = re.match(r"pytriton/tritonserver/python_backend_stubs/(\d+\.\d+)/", name)
    if stub is not None:
        return stub.group(1) != python
    if re.match(r"nvidia_pytriton\.libs/libpython3", name):
        return True
    return bool(re.match(r"tritonclient-[^/]+\.data/data/bin/", name))


def slim(wheel: Path, python: str) -> tuple[int, int]:
    """Rewrite ``wheel`` without the members :func:`dropped` names; (bytes before, after)."""
    before = wheel.stat().st_size
    tmp = wheel.with_name(wheel.name + ".part")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED,
                                                        compresslevel=9) as dst:
        gone = {i.filename for i in src.infolist() if dropped(i.filename, python)}
        for info in src.infolist():
            if info.filename in gone:
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                rows = data.decode().splitlines()
                data = "".join(f"{row}\n" for row in rows
                               if row.split(",", 1)[0] not in gone).encode()
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    tmp.replace(wheel)
    return before, wheel.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", type=Path)
    parser.add_argument("--python", default="3.12",
                        help="the serving machine's Python (its stub is kept)")
    args = parser.parse_args()
    found = sorted([*args.wheels.glob("nvidia_pytriton-*.whl"),
                    *args.wheels.glob("tritonclient-*.whl")])
    if not found:
        raise SystemExit(f"no nvidia_pytriton or tritonclient wheel in {args.wheels}")
    for wheel in found:
        before, after = slim(wheel, args.python)
        print(f"{wheel.name}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
