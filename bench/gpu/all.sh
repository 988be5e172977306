#!/usr/bin/env bash
# bench/gpu/all.sh -- every GPU check and figure of issues 22, 24 and 32 in one call of
# the device tool (at most 9 minutes), on a GPU node that received the tree with
# build-gpu/ made by /work/shared/device/pack. It builds nothing of syncsim; it compiles
# the two overhead programs with /usr/local/cuda/bin/nvcc (pack drops the benchmarks).
#
#   /work/shared/device/pack                         # on the build machine, checkout root
#   bash build-gpu/on-gpu /path/of/the/checkout 'bash bench/gpu/all.sh'
#
# Everything goes to $OUT (default ./all-out): summary.txt (one line per result, with
# the command that gave it), csan.md, overhead.md, and each step's full output. Nothing
# is read from another call's $OUT. Without a GPU, or with a piece missing, it stops
# before any step (well under a second) with one line per missing piece and exit 2.
#
# Steps, in two phases; every command has a timeout, and the whole stays within
# ALL_BUDGET_S (default 520 s): a step that no longer fits says so in one line.
#  A, at once (correctness; they share the GPU):
#   cuda      ctest -L cuda, once (-j8, 120 s a test): the CUDA corpus (each program's
#             trace must show its case: tests/cuda/corpus_check.py), the injection
#             library's and the log reader's tests, the backend's
#   pytorch   ctest -L pytorch (-j4, 150 s a test): the PyTorch corpus under capture
#   csan      the same PyTorch programs under PyTorch's own sanitizer
#             (TORCH_CUDA_SANITIZER=1, no capture, 4 at a time, 90 s each)
#   nvcc      launch_bound.cu and cublas_loop.cu, for the overhead
#  then csan.md: expected, syncsim's verdict (this call's pytorch step), CSAN's, and
#  what each sees that the other does not.
#  B, one after another (timings):
#   overhead  medians of 5 runs: launch_bound (20,000 small kernels, two streams, events;
#             goal 1.2x plain) and cublas_loop (goal 1.05x), plain, captured, captured
#             without call sites (3 runs): overhead.md
#   decode    the cuda backend's decode ms/token under full, relaxed, events (goal 2 ms on
#             the small llama), 3 runs of 16 tokens each; calibrate fitted on an events
#             run and --validate'd on a full run (goal 5 %), and the simulator's
#             prediction with that file (goal 10 %): bench/gpu/cuda-backend.sh decode
#             calibrate
#   race      one #20463 pipelined-prompt run per policy (ggml-17795, ggml-20793,
#             ggml-head; goal 20 s each) with `syncsim check`: cuda-backend.sh race,
#             RUNS=1, each run bounded by what is left
#
# Environment: BUILD (default build-gpu), OUT, SYNCSIM_PYTHON (default python3: PyTorch's
# environment on the node), NVCC (default /usr/local/cuda/bin/nvcc), ALL_BUDGET_S.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
build=${BUILD:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
out=${OUT:-$root/all-out}
py=${SYNCSIM_PYTHON:-python3}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
budget=${ALL_BUDGET_S:-520}
SECONDS=0

# --- what must be there, each missing piece one line, before anything runs
missing=0
miss() { echo "all.sh: $*"; missing=$((missing + 1)); }
if ! command -v nvidia-smi > /dev/null 2>&1; then
    miss "no GPU: nvidia-smi is not installed (run this on the GPU node)"
elif ! gpus=$(nvidia-smi -L 2>&1) || ! echo "$gpus" | grep -q '^GPU '; then
    miss "no GPU: nvidia-smi -L says: $(echo "$gpus" | head -1)"
fi
[ -x "$build/syncsim" ] || miss "no $build/syncsim: build and bundle it with /work/shared/device/pack"
[ -f "$build/lib/libsyncsim_inject.so" ] ||
    miss "no $build/lib/libsyncsim_inject.so: the build was configured without the CUDA toolkit"
[ -f "$build/lib/libsyncsim_cuda.so" ] || miss "no $build/lib/libsyncsim_cuda.so: no cuda backend in the build"
[ -f "$build/CTestTestfile.cmake" ] || miss "no $build/CTestTestfile.cmake: not a CMake build directory"
[ -x "$nvcc" ] || miss "no $nvcc: the overhead programs cannot be compiled"
command -v ctest > /dev/null 2>&1 || miss "no ctest: CMake is not installed"
command -v "$py" > /dev/null 2>&1 || miss "no $py: the PyTorch corpus and the checks need it"
[ "$missing" -eq 0 ] || exit 2
mkdir -p "$out" || { echo "all.sh: cannot create $out"; exit 2; }
summary=$out/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
left() { echo $((budget - SECONDS)); }
# cap N: N seconds, or what is left of the budget (less a margin), whichever is less;
# at least 1 (timeout 0 would mean none)
cap() { local l=$(($(left) - 10)); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1)); }
fits() { # fits STEP SECONDS: whether a step needing that long still fits; says so if not
    [ "$(left)" -ge "$2" ] && return 0
    say "$1: SKIPPED: $(left) s of the ${budget} s budget left, the step needs about $2 s"
    return 1
}
say "all.sh: $(date -u +%FT%TZ) $(echo "$gpus" | head -1);" \
    "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1);" \
    "build $build; budget ${budget} s"
"$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
      "available" if torch.cuda.is_available() else "NOT available")' > "$out/torch.txt" 2>&1 ||
    echo "cannot import torch" >> "$out/torch.txt"
say "python: $(tail -1 "$out/torch.txt")"

# --- phase A --------------------------------------------------------------------------
step_nvcc() {
    mkdir -p "$out/bin"
    timeout "$(cap 150)" "$nvcc" -O2 -arch=sm_90 -o "$out/bin/launch_bound" \
        "$root/bench/gpu/launch_bound.cu" > "$out/nvcc.txt" 2>&1 &&
        timeout "$(cap 150)" "$nvcc" -O2 -arch=sm_90 -o "$out/bin/cublas_loop" \
            "$root/bench/gpu/cublas_loop.cu" -lcublas >> "$out/nvcc.txt" 2>&1
}

step_cuda() {
    (cd "$build" && timeout "$(cap 240)" ctest -L cuda -j8 --timeout 120 --output-on-failure) \
        > "$out/ctest-cuda.txt" 2>&1
    echo $? > "$out/ctest-cuda.rc"
    mkdir -p "$out/cuda"
    cp "$build"/tests/cuda/*.trace "$build"/tests/cuda/*.cuda-log "$out/cuda/" 2> /dev/null
}

step_pytorch() {
    (cd "$build" && SYNCSIM_PYTHON=$py timeout "$(cap 240)" ctest -L pytorch -j4 --timeout 150 \
        --output-on-failure) > "$out/ctest-pytorch.txt" 2>&1
    echo $? > "$out/ctest-pytorch.rc"
    mkdir -p "$out/pytorch"
    cp "$build"/tests/pytorch/*.json "$build"/tests/pytorch/*.trace "$out/pytorch/" 2> /dev/null
}

step_csan() {
    mkdir -p "$out/csan"
    local prog
    for prog in "$root"/tests/pytorch/*.py; do
        [ "$(basename "$prog")" = corpus.py ] && continue
        echo "$prog"
    done | xargs -P 4 -I{} sh -c 'n=$(basename "$1" .py); cd "$(dirname "$1")" &&
        TORCH_CUDA_SANITIZER=1 timeout "$2" "$3" "$1" > "$4/csan/$n.txt" 2>&1; echo $? > "$4/csan/$n.rc"' \
        _ {} "$(cap 90)" "$py" "$out"
}

# ctest's line ("100% tests passed, 0 tests failed out of 14") and its failures
ctest_line() {
    local log=$1 rc
    rc=$(cat "${log%.txt}.rc" 2> /dev/null || echo '?')
    echo "$(grep -E 'tests passed|No tests were found' "$log" | tail -1)" \
         "(exit $rc; $(grep -c '(Skipped)' "$log") skipped)" \
         "$(grep -E '\((Failed|Timeout|Not Run)\)' "$log" | sed 's/^ *[0-9]* - //' | tr -s ' ' | tr '\n' ' ')"
}

# The verdicts of syncsim and CSAN per PyTorch program, and who saw what: the races
# one reports and the other does not, from this call's runs.
csan_table() {
    local table=$out/csan.md prog name want ours theirs rc both=0 csan_races=0 missed=""
    local ours_only="" theirs_only=""
    printf '| program | expected | syncsim | CSAN |\n|---|---|---|---|\n' > "$table"
    for prog in "$root"/tests/pytorch/*.py; do
        name=$(basename "$prog" .py)
        [ "$name" = corpus ] && continue
        want=$(sed -n 's/^# expect \([a-z-]*\).*/\1/p' "$prog" | head -1)
        ours=not-run
        [ -f "$out/pytorch/$name.json" ] && ours=$("$py" -c 'import json, sys
f = json.load(open(sys.argv[1]))["findings"]
print(",".join(sorted({x["kind"] for x in f})) or "clean")' "$out/pytorch/$name.json" 2> /dev/null)
        rc=$(cat "$out/csan/$name.rc" 2> /dev/null || echo '?')
        if grep -q 'CSAN detected a possible data race' "$out/csan/$name.txt" 2> /dev/null; then
            theirs=race
        elif [ "$rc" = 0 ]; then theirs=clean
        elif [ "$rc" = 77 ]; then theirs=skipped
        elif [ "$rc" = 124 ]; then theirs="timed out"
        else theirs="error (rc $rc: $(grep -v '^\s*$' "$out/csan/$name.txt" | tail -1 | cut -c1-60))"
        fi
        printf '| %s | %s | %s | %s |\n' "$name" "$want" "$ours" "$theirs" >> "$table"
        case $ours in *race*) [ "$theirs" = clean ] && ours_only="$ours_only $name" ;; esac
        if [ "$theirs" = race ]; then
            csan_races=$((csan_races + 1))
            case $ours in *race*) both=$((both + 1)) ;; *) missed="$missed $name"; theirs_only="$theirs_only $name" ;; esac
        fi
    done
    {
        echo
        echo "CSAN's races that syncsim found too: $both of $csan_races${missed:+ (not:$missed)}."
        echo "Races syncsim reports and CSAN does not:${ours_only:- none}."
        echo "Races CSAN reports and syncsim does not:${theirs_only:- none}."
        echo "(CSAN follows tensors through PyTorch's dispatcher and streams through its own calls;"
        echo "syncsim, what reached the driver, the allocator, NCCL and the NVTX marks.)"
    } >> "$table"
}

fits "phase A (ctest -L cuda, ctest -L pytorch, CSAN, nvcc)" 60 && {
    step_nvcc & nvcc_job=$!
    step_cuda & step_pytorch &
    step_csan &
    wait
    say "ctest -L cuda (cd $build && ctest -L cuda -j8 --timeout 120): $(ctest_line "$out/ctest-cuda.txt")"
    say "ctest -L pytorch (SYNCSIM_PYTHON=$py ctest -L pytorch -j4 --timeout 150): $(ctest_line "$out/ctest-pytorch.txt")"
    grep -hE '^(run_case|corpus_check): ' "$out/ctest-cuda.txt" "$out/ctest-pytorch.txt" \
        > "$out/corpus-requirements.txt" 2> /dev/null
    csan_table
    say "csan (TORCH_CUDA_SANITIZER=1 $py PROGRAM, beside the pytorch step's findings): csan.md"
    cat "$out/csan.md" >> "$summary"
    wait "$nvcc_job" 2> /dev/null
}

# --- phase B --------------------------------------------------------------------------
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }

# run_times N CMD...: N runs of CMD, its "in X s" figure (the program's own timer, from
# the first timed launch to the final synchronise) and the run's wall seconds, a line each
run_times() {
    local n=$1 t0 t1 line
    shift
    for _ in $(seq "$n"); do
        t0=$(date +%s.%N)
        line=$(timeout "$(cap 60)" "$@" 2>&1 | grep -Eo 'in [0-9.]+ s' | tail -1 | awk '{ print $2 }')
        t1=$(date +%s.%N)
        echo "${line:-nan} $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    done
}

step_overhead() {
    local table=$out/overhead.md name prog db=$out/overhead.db
    [ -x "$out/bin/launch_bound" ] && [ -x "$out/bin/cublas_loop" ] ||
        { say "overhead: FAILED: nvcc: $(tail -1 "$out/nvcc.txt" 2> /dev/null)"; return; }
    printf '| program | plain s | captured s | ratio | no sites s | ratio | goal |\n|---|---|---|---|---|---|---|\n' > "$table"
    for name in launch_bound cublas_loop; do
        prog=$out/bin/$name
        "$prog" > "$out/overhead-$name-check.txt" 2>&1 ||
            { say "overhead: $name: FAILED: $(tail -1 "$out/overhead-$name-check.txt")"; continue; }
        run_times 5 "$prog" > "$out/overhead-$name-plain.txt"
        rm -f "$db"
        run_times 5 "$build/syncsim" capture -o "$db" -- "$prog" > "$out/overhead-$name-captured.txt"
        rm -f "$db"
        SYNCSIM_CAPTURE_SITES=0 run_times 3 "$build/syncsim" capture -o "$db" -- "$prog" \
            > "$out/overhead-$name-nosites.txt"
        rm -f "$db"
        local p c s r rs goal
        p=$(awk '{ print $1 }' "$out/overhead-$name-plain.txt" | median)
        c=$(awk '{ print $1 }' "$out/overhead-$name-captured.txt" | median)
        s=$(awk '{ print $1 }' "$out/overhead-$name-nosites.txt" | median)
        r=$(awk -v a="$c" -v b="$p" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
        rs=$(awk -v a="$s" -v b="$p" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
        goal=$([ "$name" = launch_bound ] && echo "<= 1.2x" || echo "<= 1.05x")
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$p" "$c" "$r" "$s" "$rs" "$goal" >> "$table"
    done
    [ "$(wc -l < "$table")" -gt 2 ] || return
    say "overhead (medians, the program's own timer; $out/bin/PROGRAM vs $build/syncsim capture -o DB -- $out/bin/PROGRAM, SYNCSIM_CAPTURE_SITES=0 for no sites): overhead.md"
    cat "$table" >> "$summary"
}

# cuda-backend.sh's steps, bounded by what is left; its summary lines join ours
backend() { # backend DIR CAP ENV... -- STEPS...
    local dir=$1 limit=$2
    shift 2
    env "$@" STEP_TIMEOUT="$(cap 60)" timeout "$(cap "$limit")" \
        bash "$root/bench/gpu/cuda-backend.sh" "$build" "$dir" ${BACKEND_STEPS} > "$dir.log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && say "$(basename "$dir"): the step was stopped at the budget (log $dir.log)"
    sed 's/^/  /' "$dir/summary.txt" 2> /dev/null >> "$summary"
    [ -f "$dir/summary.txt" ] || say "$(basename "$dir"): FAILED: $(tail -1 "$dir.log")"
}

fits overhead 90 && step_overhead
fits "decode and calibrate" 90 && {
    say "decode, calibrate (RUNS=3 TOKENS=16 bash bench/gpu/cuda-backend.sh $build OUT/backend decode calibrate):"
    BACKEND_STEPS="decode calibrate" backend "$out/backend" 200 RUNS=3 TOKENS=16
}
fits "race (#20463)" 60 && {
    say "race (#20463, RUNS=1 bash bench/gpu/cuda-backend.sh $build OUT/race race; goal 20 s a run):"
    BACKEND_STEPS="race" backend "$out/race" 400 RUNS=1
}
say "all.sh: done in $SECONDS s: $out"
