#!/usr/bin/env bash
# The GPU benchmark of the product (scripts/bench_gpu.py) and the GPU tests on the GPU
# machine, as a list of steps in one device call (lab/perf-notes.md's runs 100 and later).
#
# Here, in the repo root (needs network; makes DIR/wheels, DIR/litert.tar.xz, DIR/assets):
#     scripts/device/device_steps.sh prep .device
# On the GPU machine (Python 3.12, torch with CUDA, no network), carrying .device:
#     RUN=112 TOTAL=560 scripts/device/device_steps.sh run .device cur1 cur2 gpu s12_cur1
# Steps, in the order given, each skipped once TOTAL seconds (default 560) have passed:
#     <variant><n>        one stream offline, 1 face (`--only "1 face offline"`), INFO log
#     s<k>_<variant><n>   k streams live (`--only streams --streams k`)
#     build_<variant><n>  `livecam engines build` first (`--engines-build`), then one stream
#     gpu                 the GPU tests (pytest -m gpu), at most GT seconds (default 150)
#     leak                scripts/leak_table.py --gpu: every leak clip through `livecam run` on
#                         the GPU path, the shipped settings; LEAK_ARGS adds `--set K=V`, ...
#     bench_streams       scripts/bench_streams.py: `livecam engines build`, then `livecam run`
#                         with N pairs and `livecam daemon` with streams: for N in $STREAMS
#                         (default 1,4,8,16,32), the tree as it is; BUILD=1 runs
#                         `engines build` first, BENCH_ARGS adds options (`--set K=V`, ...)
# The one-stream, streams and build steps run CUDA graphs unless ONE_ARGS replaces that
# (`ONE_ARGS="--set advanced.engine.compile_max_autotune=false"`: the compiled generator).
# A variant is `cur` (the tree as it is) or a folder DIR/var_<variant>/ whose files are laid
# over a copy of the tree (the old version of the files an A/B compares). <n> only tells the
# runs apart. The first step on a fresh machine compiles (about 220-250 s); later steps of the
# same call find the engine cache filled. Each step's JSON and log go into
# $OUT/run$RUN.tgz (rewritten after every step); the log lines that matter are printed.
# Sourced (scripts/device/bench_edge16.sh), it only defines PYTHON, SITE and the functions.
set -uo pipefail

PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
# shellcheck source=scripts/device/device_carry.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_carry.sh"

prep() {
    local dir=$1
    mkdir -p "$dir/wheels"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d "$dir/wheels" av platformdirs || exit 1
    # ai-edge-litert runs the face models' reference on the CPU; without its WebGPU
    # accelerator, tools and vendored files it travels in 7 MB instead of 40
    local lite
    lite=$(mktemp -d)
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_17_x86_64 -d "$lite" ai-edge-litert==1.4.0 \
        || exit 1
    (cd "$lite" && unzip -q ./*.whl -d site && rm -rf site/ai_edge_litert/tools \
        site/ai_edge_litert/vendors site/ai_edge_litert/libLiteRtWebGpuAccelerator.so &&
        tar cJf litert.tar.xz -C site .) || exit 1
    mv "$lite/litert.tar.xz" "$dir/" && rm -rf "$lite"
    "$PYTHON" scripts/device/export_bench_assets.py "$dir/assets" || exit 1
    check_carry "$dir"
}

install_site() {  # on the GPU machine: DIR's wheels and LiteRT (prep's) into $SITE, no network
    local dir=$1
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$SITE" "$dir"/wheels/*.whl || exit 1
    mkdir -p "$SITE" && tar xJf "$dir/litert.tar.xz" -C "$SITE" || exit 1
}

tree_for() {  # the folder to run a variant in: the tree itself, or a copy with its files laid over
    local dir=$1 variant=$2
    if [[ $variant == cur ]]; then
        pwd
        return
    fi
    local copy=/tmp/tree_$variant
    if [[ ! -d $copy ]]; then
        mkdir -p "$copy"
        copy_tree "$dir" "$copy"
        cp -r "$dir/var_$variant/." "$copy/"
    fi
    echo "$copy"
}

# The working tree's files into TO, less .git, the carry folder DIR and what .gitignore ignores:
# its source files, also on the GPU machine, where the tree arrives without .git (no git ls-files).
copy_tree() {
    local dir=$1 to=$2 pattern
    local skip=(--exclude=./.git)
    [[ $dir == "$PWD"/* ]] && skip+=(--exclude="./${dir#"$PWD"/}")
    # .gitignore's lines as tar's patterns: "/x/" at the top only, "x/" and "*.x" anywhere
    while read -r pattern || [[ -n $pattern ]]; do
        [[ -z $pattern || $pattern == \#* ]] && continue
        pattern=${pattern%/}
        [[ $pattern == /* ]] && pattern=.$pattern
        skip+=(--exclude="$pattern")
    done < .gitignore
    tar -cf - "${skip[@]}" . | tar -xf - -C "$to"
}

run() {
    local dir
    dir=$(cd "$1" && pwd)
    shift
    local out=${OUT:-$PWD/out} res=/tmp/results_${RUN:-0} start=$SECONDS
    mkdir -p "$out" "$res"
    install_site "$dir"
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    local assets=$dir/assets step left
    for step in "$@"; do
        left=$((${TOTAL:-560} - (SECONDS - start)))
        if ((left < 30)); then
            echo "== $step: skipped, ${left} s left"
            continue
        fi
        echo "== $step (${left} s left)"
        local kind=one streams="" variant=${step%%[0-9]*} tree
        if [[ $step == gpu ]]; then
            kind=gpu
        elif [[ $step =~ ^s([0-9]+)_([a-z]+)[0-9]*$ ]]; then
            kind=streams streams=${BASH_REMATCH[1]} variant=${BASH_REMATCH[2]}
        elif [[ $step =~ ^build_([a-z]+)[0-9]*$ ]]; then
            kind=build variant=${BASH_REMATCH[1]}
        fi
        if [[ $step == bench_streams ]]; then
            (timeout "$left" "$PYTHON" -m scripts.bench_streams --photos "$assets/photos" \
                --models-dir "$assets/mediapipe_modules" --work-dir /tmp/lcw \
                ${BUILD:+--engines-build} ${BENCH_ARGS:-} \
                --streams "${STREAMS:-1,4,8,16,32}" --budget-s "$((left - 60))" \
                --log-level INFO --out "$res/$step.json" > "$res/$step.log" 2>&1)
            echo "   exit $?"
            grep -i "^| \|ERROR\|engines build\] \|this start compiles\|nothing compiles\|GPU memory\|its parts\|batches:\|GPU kernels over" \
                "$res/$step.log" | tail -n 90
        elif [[ $step == leak ]]; then
            (timeout "$left" "$PYTHON" -m scripts.leak_table --gpu --settings default \
                ${LEAK_ARGS:-} --workdir /tmp/leak --json "$res/$step.json" \
                > "$res/$step.log" 2>&1)
            echo "   exit $?"
            grep -v "^ *$" "$res/$step.log" | tail -n 30
        elif [[ $kind == gpu ]]; then
            # tests/remote: aiortc is not on the GPU machine, and none of them needs a GPU
            (timeout "$((left < ${GT:-150} ? left : ${GT:-150}))" "$PYTHON" -m pytest -q \
                -m gpu -p no:cacheprovider --ignore=tests/remote tests > "$res/$step.log" 2>&1)
            tail -n 15 "$res/$step.log"
        else
            tree=$(tree_for "$dir" "$variant")
            local what=(--only "1 face offline" --window-s 4)
            [[ $kind == streams ]] && what=(--only streams --streams "$streams" --window-s 6)
            [[ $kind == build ]] && what=(--engines-build --only "engines build,1 face offline"
                                          --window-s 4)
            (cd "$tree" && PYTHONPATH=$tree:$PYTHONPATH timeout "$left" "$PYTHON" \
                -m scripts.bench_gpu --photos "$assets/photos" \
                --models-dir "$assets/mediapipe_modules" --warm-s 2 --work-dir /tmp/lcw \
                --log-level INFO ${ONE_ARGS---set advanced.engine.torch_mode=cuda_graphs} "${what[@]}" \
                --out "$res/$step.json" > "$res/$step.log" 2>&1)
            echo "   exit $?"
            grep -v "compiled code loaded whole\|compiled code reused whole\|compiled the \|compiling it, or" \
                "$res/$step.log" | grep -i "opened in\|cannot\|fps\|late\|held\|error\|engines build" | tail -n 25
        fi
        tar czf "$out/run${RUN:-0}.tgz" -C "$res" .
    done
}

[[ ${BASH_SOURCE[0]} != "$0" ]] && return  # sourced: the functions only

case ${1:-} in
    prep) prep "${2:?usage: device_steps.sh prep DIR}" ;;
    run) shift; run "${1:?usage: device_steps.sh run DIR STEP...}" "${@:2}" ;;
    *) echo "usage: device_steps.sh prep DIR | run DIR STEP..." >&2
       exit 2 ;;
esac
