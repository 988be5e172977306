#!/usr/bin/env bash
# capture.sh [STEP...] -- the GPU run of issue 22 (`syncsim capture` on a
# real GPU), one script for one device session. Run on the GPU node from
# the checkout root, with build-gpu/ made by /work/shared/device/pack:
#
#   bash build-gpu/on-gpu CHECKOUT 'bash bench/gpu/capture.sh'
#
# STEPs (default: all, in this order; name some to split the run):
#   cuda      ctest -L cuda: the CUDA corpus, each test also asserting that
#             its kernels carry accesses, and cuda/capture_links_no_runtime
#   pytorch   ctest -L pytorch: the PyTorch corpus under capture
#   csan      the same PyTorch programs under PyTorch's own sanitizer
#             (TORCH_CUDA_SANITIZER=1, no capture): the table of both verdicts
#   overhead  the cost of capture, medians of 5 runs: the launch-bound program
#             (20,000 small kernels on two streams handing over with events),
#             a cuBLAS-bound loop, the corpus pipeline; plain, captured, and
#             captured without call sites (SYNCSIM_CAPTURE_SITES=0)
#
# Everything goes to $OUT (default ./capture-out): summary.txt (one line per
# result), csan.md, overhead.md, each step's full output, the corpus'
# findings. Every step that fails says so in one line of summary.txt and the
# next step runs; without a GPU the script stops at once with one line.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${SYNCSIM_BUILD:-$root/build-gpu}
out=${OUT:-$PWD/capture-out}
py=${SYNCSIM_PYTHON:-python3}
mkdir -p "$out" || { echo "capture.sh: cannot create $out"; exit 1; }
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
stop() { say "capture.sh: $*"; exit 1; }

# --- what must be there: a GPU first, so that a machine without one stops here
command -v nvidia-smi >/dev/null 2>&1 || stop "no GPU: nvidia-smi is not installed (run this on the GPU node)"
nvidia-smi -L > "$out/gpu.txt" 2>&1 && grep -q '^GPU ' "$out/gpu.txt" ||
    stop "no GPU: nvidia-smi -L says: $(head -1 "$out/gpu.txt")"
[ -x "$build/syncsim" ] || stop "no $build/syncsim: build it with /work/shared/device/pack first"
[ -f "$build/lib/libsyncsim_inject.so" ] ||
    stop "no $build/lib/libsyncsim_inject.so: build-gpu was configured without the CUDA toolkit"
say "gpu: $(head -1 "$out/gpu.txt"); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
syncsim=$build/syncsim
steps=${*:-cuda pytorch csan overhead}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

step_cuda() {
    (cd "$build" && timeout 300 ctest -L cuda --output-on-failure) > "$out/ctest-cuda.txt" 2>&1
    local rc=$?
    say "ctest -L cuda: $(grep -E 'tests passed|No tests' "$out/ctest-cuda.txt" | tail -1) (rc $rc)"
    grep -E 'run_case: .*kernels' "$out/ctest-cuda.txt" | sed 's/^[0-9]*: //' >> "$out/ctest-cuda-kernels.txt"
    cp "$build"/tests/cuda/*.trace "$out/" 2>/dev/null
    [ $rc -eq 0 ] || say "cuda: FAILED: $(grep -E '\(Failed\)|\(Not Run\)|Timeout' "$out/ctest-cuda.txt" | tr -s ' ' | tr '\n' ' ')"
}

step_pytorch() {
    "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' > "$out/torch.txt" 2>&1 ||
        { say "pytorch: FAILED: $py cannot use torch with CUDA: $(tail -1 "$out/torch.txt")"; return; }
    say "pytorch: torch $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
    (cd "$build" && SYNCSIM_PYTHON=$py timeout 420 ctest -L pytorch --output-on-failure) \
        > "$out/ctest-pytorch.txt" 2>&1
    local rc=$?
    say "ctest -L pytorch: $(grep -E 'tests passed' "$out/ctest-pytorch.txt" | tail -1) (rc $rc)"
    mkdir -p "$out/pytorch"
    cp "$build"/tests/pytorch/*.json "$build"/tests/pytorch/*.trace "$out/pytorch/" 2>/dev/null
    [ $rc -eq 0 ] || say "pytorch: FAILED: $(grep -E '\(Failed\)|Timeout' "$out/ctest-pytorch.txt" | tr -s ' ' | tr '\n' ' ')"
}

step_csan() {
    local table=$out/csan.md
    printf '| program | expected | syncsim | CSAN |\n|---|---|---|---|\n' > "$table"
    for prog in "$root"/tests/pytorch/*.py; do
        local name; name=$(basename "$prog" .py)
        [ "$name" = corpus ] && continue
        local want; want=$(sed -n 's/^# expect \([a-z-]*\).*/\1/p' "$prog" | head -1)
        local ours=not-run json=$out/pytorch/$name.json
        if [ -f "$json" ]; then
            ours=$("$py" -c 'import json, sys
f = json.load(open(sys.argv[1]))["findings"]
print(",".join(sorted({x["kind"] for x in f})) or "clean")' "$json")
        fi
        TORCH_CUDA_SANITIZER=1 timeout 120 "$py" "$prog" > "$out/csan-$name.txt" 2>&1
        local rc=$? theirs
        if grep -q 'CSAN detected a possible data race' "$out/csan-$name.txt"; then theirs=race
        elif [ $rc -eq 0 ]; then theirs=clean
        elif [ $rc -eq 77 ]; then theirs=skipped
        else theirs="error (rc $rc: $(grep -v '^\s*$' "$out/csan-$name.txt" | tail -1 | cut -c1-60))"
        fi
        printf '| %s | %s | %s | %s |\n' "$name" "$want" "$ours" "$theirs" >> "$table"
    done
    say "csan: table in csan.md"
    cat "$table" >> "$summary"
}

# run_times N CMD...: N runs of CMD, its "in X s" figures (the program's own
# time) and the runs' wall-clock seconds, as "own wall" lines.
run_times() {
    local n=$1; shift
    for _ in $(seq "$n"); do
        local t0 t1 line
        t0=$(date +%s.%N)
        line=$("$@" 2>&1 | grep -Eo 'in [0-9.]+ s' | tail -1 | awk '{ print $2 }')
        t1=$(date +%s.%N)
        echo "${line:-nan} $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    done
}

step_overhead() {
    local bin=$out/bin
    mkdir -p "$bin"
    nvcc -O2 -g -arch=sm_90 -o "$bin/launch_bound" "$root/bench/gpu/launch_bound.cu" > "$out/nvcc.txt" 2>&1 &&
        nvcc -O2 -g -arch=sm_90 -o "$bin/cublas_loop" "$root/bench/gpu/cublas_loop.cu" -lcublas >> "$out/nvcc.txt" 2>&1 ||
        { say "overhead: FAILED: nvcc: $(tail -1 "$out/nvcc.txt")"; return; }
    local table=$out/overhead.md
    printf '| program | plain own s | captured own s | ratio | no sites own s | ratio | plain wall s | captured wall s |\n|---|---|---|---|---|---|---|---|\n' > "$table"
    local name
    for name in launch_bound cublas_loop pipeline_clean; do
        local prog=$bin/$name
        [ "$name" = pipeline_clean ] && prog=$build/tests/cuda/cuda_pipeline_clean
        [ -x "$prog" ] || { say "overhead: $name: FAILED: no $prog"; continue; }
        "$prog" > "$out/overhead-$name-check.txt" 2>&1 ||
            { say "overhead: $name: FAILED: $(tail -1 "$out/overhead-$name-check.txt")"; continue; }
        local db=$out/overhead.db
        run_times 5 "$prog" > "$out/overhead-$name-plain.txt"
        run_times 5 "$syncsim" capture -o "$db" -- "$prog" > "$out/overhead-$name-captured.txt"
        SYNCSIM_CAPTURE_SITES=0 run_times 5 "$syncsim" capture -o "$db" -- "$prog" \
            > "$out/overhead-$name-nosites.txt"
        rm -f "$db"
        local p c s pw cw
        p=$(awk '{ print $1 }' "$out/overhead-$name-plain.txt" | median)
        c=$(awk '{ print $1 }' "$out/overhead-$name-captured.txt" | median)
        s=$(awk '{ print $1 }' "$out/overhead-$name-nosites.txt" | median)
        pw=$(awk '{ print $2 }' "$out/overhead-$name-plain.txt" | median)
        cw=$(awk '{ print $2 }' "$out/overhead-$name-captured.txt" | median)
        local r rs
        r=$(awk -v a="$c" -v b="$p" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
        rs=$(awk -v a="$s" -v b="$p" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$p" "$c" "$r" "$s" "$rs" "$pw" "$cw" >> "$table"
    done
    say "overhead: medians of 5 in overhead.md (own s: the program's own timer; pipeline_clean has none: wall only)"
    cat "$table" >> "$summary"
}

for s in $steps; do
    case $s in
    cuda | pytorch | csan | overhead) "step_$s" ;;
    *) say "capture.sh: unknown step '$s' (cuda, pytorch, csan, overhead)" ;;
    esac
done
say "done: $out"
