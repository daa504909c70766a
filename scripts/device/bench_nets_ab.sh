#!/usr/bin/env bash
# The face networks' calls alone (scripts/bench_gpu_models.py: the full-range detector and the
# mesh at a few batch sizes, fp16, eager and in a CUDA graph) in this tree and in copies with
# DIR/var_NAME/ laid over it, one after the other in one call, for an A/B of the networks'
# kernels. On the GPU machine, carrying .device:
#     NETS="cur base" BATCHES="1 16 128" bash scripts/device/bench_nets_ab.sh
# Each variant's table is printed and its JSON goes to $OUT/nets_NAME.json.
set -uo pipefail
# shellcheck source=scripts/device/device_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_steps.sh"
dir=$(cd "${DIR:-.device}" && pwd)
out=${OUT:-$PWD/out}
mkdir -p "$out"
install_site "$dir"
for v in ${NETS:-cur base}; do
    tree=$(tree_for "$dir" "$v")
    echo "== nets $v"
    # shellcheck disable=SC2086  # BATCHES: numbers, split on purpose
    (cd "$tree" && PYTHONPATH=$tree:$SITE timeout "${NETS_TIMEOUT:-120}" "$PYTHON" \
        -m scripts.bench_gpu_models --device cuda --dtypes fp16 --batches ${BATCHES:-1 16 128} \
        --only detect-full mesh --iters "${ITERS:-30}" --models-dir "$dir/assets/mediapipe_modules" \
        --image "$dir/assets/photos/${PHOTO:-astronaut.png}" \
        --json "$out/nets_$v.json" 2>&1 | grep -v "^USDT" | tail -n 14)
done
