#!/usr/bin/env bash
# Many streams through `livecam run` (scripts/bench_streams.py) on the GPU machine, one row per
# variant in one call, for an A/B of the face follower's edge search:
#     cur_on    this tree, the edge search on
#     cur_off   this tree, the edge search off
#     prev_on   a copy of this tree with DIR/var_prev/ laid over it (the old files), edge on;
#               any NAME_on or NAME_off likewise with DIR/var_NAME/
#     spy_on    as cur_on, under `py-spy record --threads $SPY_ARGS` (SPY_ARGS=--gil: only the
#               thread holding the GIL; DIR/pyspy/ holds py-spy's wheel:
#               `pip download --no-deps --only-binary=:all: --platform manylinux1_x86_64 py-spy`)
# Here: `scripts/device/device_steps.sh prep .device` (wheels, LiteRT, assets), then on the GPU
# machine, carrying .device:
#     export LIVECAM_TEST_PHOTOS=$PWD/.device/assets/photos \
#            LIVECAM_MEDIAPIPE_MODULES=$PWD/.device/assets/mediapipe_modules
#     VARIANTS="cur_on prev_on cur_off spy_on" NS=16 WIN=6 TOTAL=540 \
#       EXTRA="--set advanced.gpu.compile_networks=false" bash scripts/device/bench_edge16.sh
# The first start on a fresh machine compiles (or traces) what the later ones load. Each run's
# JSON, log (and py-spy's collapsed stacks), named N-VARIANT, go into $OUT/edge16.tgz, rewritten
# after each run.
set -uo pipefail
# PYTHON, SITE (defaults python3, /tmp/site), install_site and tree_for, as device_steps.sh's run
# has them
# shellcheck source=scripts/device/device_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_steps.sh"
dir=$(cd "${DIR:-.device}" && pwd)
out=${OUT:-$PWD/out}
res=/tmp/res_edge
mkdir -p "$out" "$res"
install_site "$dir"
if [[ ${VARIANTS:-} == *spy_* ]]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/spy "$dir"/pyspy/*.whl || exit 1
fi
start=$SECONDS
i=0
for v in ${VARIANTS:-cur_on prev_on cur_off}; do
    i=$((i + 1))
    r=$i-$v  # a variant run twice keeps both runs' files
    left=$((${TOTAL:-540} - (SECONDS - start)))
    if ((left < 40)); then
        echo "== $v skipped ($left s left)"
        continue
    fi
    tree=$PWD
    [[ $v != cur_* && $v != spy_* ]] && tree=$(tree_for "$dir" "${v%_*}")
    edge=true
    [[ $v == *_off ]] && edge=false
    spy=()
    # shellcheck disable=SC2206  # SPY_ARGS: options, split on purpose
    [[ $v == spy_* ]] && spy=(/tmp/spy/bin/py-spy record --nonblocking --threads --rate 40
                              ${SPY_ARGS:-} --format raw -o "$res/$r.folded" --)
    echo "== $v ($left s left)"
    # shellcheck disable=SC2086  # EXTRA: options, split on purpose
    (cd "$tree" && PYTHONPATH=$tree:$SITE timeout "$left" "${spy[@]}" "$PYTHON" \
        -m scripts.bench_streams --photos "$dir/assets/photos" \
        --models-dir "$dir/assets/mediapipe_modules" --work-dir /tmp/lcw \
        --set advanced.gpu.compile_paste=false --set advanced.engine.torch_mode=cuda_graphs \
        --set advanced.analysis.edge_search=$edge ${EXTRA:-} --window-s "${WIN:-6}" \
        --commands run --streams "${NS:-16}" --budget-s "$((left - 30))" --log-level INFO \
        --out "$res/$r.json" > "$res/$r.log" 2>&1)
    echo "   exit $?"
    grep -i "^| livecam\|ERROR\|this start compiles\|nothing compiles\|Traceback\|its parts\|batches:" \
        "$res/$r.log" | tail -n 12
    tar czf "$out/edge16.tgz" -C "$res" .
done
