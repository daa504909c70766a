#!/usr/bin/env bash
# The Triton benchmark (scripts/bench_triton.py) on the GPU machine, in one device call.
#
# Here, in the repo root (needs network; makes DIR/wheels and DIR/assets, about 55 MB):
#     echo /.device/ >> .git/info/exclude      # once, if .device/ is not ignored yet
#     scripts/device/device_triton.sh prep .device/triton
# On the GPU machine (Python 3.12, no network), carrying .device/triton:
#     scripts/device/device_triton.sh run .device/triton/wheels .device/triton/assets [bench options]
# installs the wheels with pip --no-deps --target /tmp/site, runs the benchmark (its default
# options below, then yours) and leaves in $OUT: bench_triton.json (rewritten after every
# run), bench_triton.log, and the ends of the server's and the streams' logs.
#
# What travels (docs/triton.md): nvidia-pytriton 0.7.0 slimmed to the Python 3.12 stub
# (scripts/device/slim_triton_wheels.py; 55.4 -> 39.3 MB), tritonclient 2.51.0 without its
# perf_analyzer binaries (14.0 -> 0.1 MB), python-rapidjson (tritonclient.grpc imports it),
# platformdirs, ai-edge-litert 1.4.0 (the face models on the CPU; mediapipe is not there) and
# MediaPipe's three .tflite files. grpcio, protobuf, numpy, scikit-image, psutil, pyyaml, onnx,
# onnxruntime and torch are in the machine's image.
set -euo pipefail

PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
# shellcheck source=scripts/device/device_carry.sh
source "$(dirname "$0")/device_carry.sh"
WORK=${WORK:-/tmp/bench_triton}

prep() {
    local dir=$1
    mkdir -p "$dir/wheels"
    local platforms=(--platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64
                     --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
                     --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d "$dir/wheels" \
        nvidia-pytriton==0.7.0 tritonclient==2.51.0 python-rapidjson==1.25 \
        platformdirs==4.14.9 ai-edge-litert==1.4.0
    "$PYTHON" scripts/device/slim_triton_wheels.py "$dir/wheels" --python 3.12
    "$PYTHON" scripts/device/export_bench_assets.py "$dir/assets" --no-photos
    check_carry "$dir"
}

run() {
    local wheels=$1 assets=$2
    shift 2
    local out=${OUT:-$PWD/out}
    mkdir -p "$out"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$SITE" "$wheels"/*.whl
    export PYTHONPATH=$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}
    LIVECAM_MEDIAPIPE_MODULES=$(cd "$assets" && pwd)/mediapipe_modules
    export LIVECAM_MEDIAPIPE_MODULES PYTHONUNBUFFERED=1
    local status=0
    "$PYTHON" -m scripts.bench_triton --streams 1,8,16,32 --in-flight 3 --seconds 15 \
        --warmup-s 8 --budget-s 520 --work "$WORK" \
        --out "$out/bench_triton.json" "$@" 2>&1 | tee "$out/bench_triton.log" || status=$?
    local log
    log=$(find "$WORK" -name tritonserver.log 2>/dev/null | head -1)
    if [[ -n $log ]]; then
        tail -n 200 "$log" > "$out/tritonserver_tail.log"
    fi
    for f in "$WORK"/logs/*/stream0.log; do
        [[ -f $f ]] && { echo "== $f"; tail -n 15 "$f"; }
    done > "$out/stream_logs_tail.txt" 2>/dev/null || true
    return "$status"
}

case ${1:-} in
    prep) prep "${2:?usage: device_triton.sh prep DIR}" ;;
    run) shift; run "${1:?usage: device_triton.sh run WHEELS ASSETS}" \
             "${2:?usage: device_triton.sh run WHEELS ASSETS}" "${@:3}" ;;
    *) echo "usage: device_triton.sh prep DIR | run WHEELS ASSETS [bench options]" >&2
       exit 2 ;;
esac
