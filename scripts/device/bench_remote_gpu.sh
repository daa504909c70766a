#!/usr/bin/env bash
# `livecam serve` sessions on the GPU machine (scripts/bench_remote.py --gpu): the neural swap
# on the GPU pipeline with the stand-in models, N real aiortc WHIP clients at 720p30 on the
# same host (issue 40's 16-session goal). DIR/wheels holds aiortc and its dependencies beside
# PyAV (`pip download --only-binary=:all: --python-version 3.12 --platform
# manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 "aiortc>=1.16,<2"`, all but PyAV and
# typing_extensions, which the machine has). On the GPU machine, carrying .device:
#     export LIVECAM_TEST_PHOTOS=$PWD/.device/assets/photos \
#            LIVECAM_MEDIAPIPE_MODULES=$PWD/.device/assets/mediapipe_modules
#     SESSIONS="1 4 8 16" SECONDS_EACH=15 TOTAL=560 bash scripts/device/bench_remote_gpu.sh
# EXTRA adds options (`--set K=V` for the server). The JSON and log go into $OUT/remote.tgz.
set -uo pipefail
# shellcheck source=scripts/device/device_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_steps.sh"
dir=$(cd "${DIR:-.device}" && pwd)
out=${OUT:-$PWD/out}
res=/tmp/res_remote
mkdir -p "$out" "$res"
install_site "$dir"
# shellcheck disable=SC2086  # SESSIONS and EXTRA: lists, split on purpose
PYTHONPATH=$PWD:$SITE PYTHONUNBUFFERED=1 timeout "${TOTAL:-560}" "$PYTHON" -m scripts.bench_remote \
    --gpu --photos "$dir/assets/photos" --sessions ${SESSIONS:-1 4 8 16} \
    --seconds "${SECONDS_EACH:-15}" --work /tmp/lcr ${EXTRA:-} --json "$res/remote.json" \
    > "$res/remote.log" 2>&1
echo "exit $?"
grep -v "^INFO\|face is only" "$res/remote.log" | tail -n 40
tar czf "$out/remote.tgz" -C "$res" .
