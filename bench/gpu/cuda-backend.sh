#!/usr/bin/env bash
# bench/gpu/cuda-backend.sh -- the GPU checks of issue 24 (the `cuda` backend at ggml's
# sizes) in one go, on a GPU node that received a build made by
# /work/shared/device/pack (build-gpu/). It builds nothing.
#
# usage: bench/gpu/cuda-backend.sh [BUILD [OUTDIR [STEP...]]]
#   BUILD   the build directory (default build-gpu), run from the checkout's root;
#           on the node through pack's launcher, e.g.
#             bash build-gpu/on-gpu /work/wt-cudabe 'bash bench/gpu/cuda-backend.sh build-gpu "$OUT"'
#   OUTDIR  where every log, database and the summary go (default $OUT, else ./cuda-backend-out)
#   STEP    any of tests decode race calibrate (default: all four, in that order);
#           steps after the first read what earlier ones wrote in OUTDIR (calibrate
#           needs decode's databases), so a split run keeps one OUTDIR.
# Environment: RUNS (default 5) runs per figure; TOKENS (default 32) decode tokens;
#   STEP_TIMEOUT (default 120) seconds for any one syncsim command; for a dry run
#   of the script itself on other devices: DEVICES (default cuda:0,cuda:0,cpu), MODEL
#   (default llama), RACE_MODEL (default llama:ubatch=512), RACE_PROMPT (default 2048).
#
# What it measures, into OUTDIR/summary.txt (one line a figure; logs beside it):
#   tests      ctest -L cuda (the corpus and tests/cuda/test_cuda_backend.c)
#   decode     ms/token of the default small llama on cuda:0,cuda:0,cpu (2 copy slots)
#              under full, relaxed and events: the median of RUNS runs each, and the
#              syncs per token each policy makes
#   race       the #20463 setup (--model llama:ubatch=512 --prompt 2048 --devices
#              cuda:0,cuda:0,cpu) under ggml-17795, ggml-20793, ggml-head, RUNS runs
#              each: wall seconds (reference check included), outputs match or DIFFER,
#              `syncsim check`'s findings, and whether the outputs differ across runs
#   calibrate  a device file fitted to the first events run, validated on the first
#              full run (makespan error), and the simulator's decode ms/token with it
#              against the measured events median
# Every step that needs the GPU stops the script at once with one line when there is
# none (exit 2); a command past STEP_TIMEOUT is one line too, and the step goes on
# with the next policy. Device time: race is 3 x RUNS runs of a 2048-token prompt
# (issue 24's goal: 20 s each). bench/gpu/all.sh, the one device script, runs its
# decode and calibrate steps (RUNS=3, TOKENS=16) and its race step (RUNS=1) within
# one call's budget; tests (ctest -L cuda) is all.sh's own first step.
set -u
build=${1:-build-gpu}
out=${2:-${OUT:-./cuda-backend-out}}
shift $(( $# < 2 ? $# : 2 ))
steps=${*:-tests decode race calibrate}
runs=${RUNS:-5}
tokens=${TOKENS:-32}
limit=${STEP_TIMEOUT:-120}
bin=$build/syncsim
pair=${DEVICES:-cuda:0,cuda:0,cpu}
model=${MODEL:-llama}
race_model=${RACE_MODEL:-llama:ubatch=512}
race_prompt=${RACE_PROMPT:-2048}

die() { echo "cuda-backend.sh: $*" >&2; exit 2; }
note() { echo "$*" | tee -a "$out/summary.txt"; }

[ -x "$bin" ] || die "no $bin: give the build directory pack made (build-gpu)"
mkdir -p "$out" || die "cannot create $out"
# The GPU, asked once, by the backend itself: a one-layer run of one token.
if ! probe=$(timeout 60 "$bin" run --model llama:n_layer=1,n_embd=64,n_head=2,n_head_kv=2,n_ff=64,n_vocab=64,n_ctx=8,ubatch=1 \
        --devices "${pair%%,*},cpu" --tokens 1 --prompt 1 -o "$out/probe.db" 2>&1); then
    die "no usable GPU: $(echo "$probe" | grep -v ' evaluations (' | tail -1)"
fi
: > "$out/summary.txt"
note "cuda-backend.sh: $(date -u +%FT%TZ) build $build, $runs runs per figure, $tokens decode tokens"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader |
    sed 's/^/gpu: /' | tee -a "$out/summary.txt"

# run LOG ARGS...: one syncsim command, bounded; its output in LOG. Returns its status
# (124: timed out, said in one line).
run() {
    local log=$1; shift
    timeout "$limit" "$bin" "$@" > "$log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && note "TIMEOUT after ${limit}s: syncsim $* (log $log)"
    return $rc
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "none"}'; }

step_tests() {
    (cd "$build" && timeout 600 ctest -L cuda --output-on-failure) > "$out/ctest-cuda.log" 2>&1
    local rc=$?
    note "tests: ctest -L cuda exit $rc ($(grep -E 'tests passed|tests failed' "$out/ctest-cuda.log" | tail -1)," \
         "$(grep -c '(Skipped)' "$out/ctest-cuda.log") skipped)"
}

step_decode() {
    for p in full relaxed events; do
        : > "$out/decode-$p.ms"
        for i in $(seq 1 "$runs"); do
            local db=$out/decode-$p-$i.db
            rm -f "$db"
            run "$out/decode-$p-$i.log" run --model "$model" --devices $pair --copies 2 --policy $p \
                --tokens "$tokens" --prompt 32 -o "$db"
            [ $? -eq 124 ] && break     # one timeout says it: the next policy
            local ms
            ms=$(sed -n 's/^decode: \([0-9.]*\) ms\/token.*/\1/p' "$out/decode-$p-$i.log")
            [ -n "$ms" ] && echo "$ms" >> "$out/decode-$p.ms"
        done
        local syncs verdict
        syncs=$(sed -n 's/.*, \([0-9.]*\) syncs\/token.*/\1/p' "$out/decode-$p-1.log")
        verdict=$(grep -hoE 'outputs (match|DIFFER)' "$out"/decode-$p-*.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')
        note "decode $p: median $(median < "$out/decode-$p.ms") ms/token over $(wc -l < "$out/decode-$p.ms") runs" \
             "($(tr '\n' ' ' < "$out/decode-$p.ms")); ${syncs:-?} syncs/token; $verdict"
    done
}

step_race() {
    for p in ggml-17795 ggml-20793 ggml-head; do
        : > "$out/race-$p.s"
        : > "$out/race-$p.err"
        for i in $(seq 1 "$runs"); do
            local db=$out/race-$p-$i.db log=$out/race-$p-$i.log
            rm -f "$db"
            local t0 t1
            t0=$(date +%s.%N)
            run "$log" run --model "$race_model" --prompt "$race_prompt" --devices $pair --policy $p -o "$db"
            local rc=$?
            t1=$(date +%s.%N)
            [ $rc -eq 124 ] && break    # one timeout says it: the next policy
            echo "$t0 $t1" | awk '{printf "%.2f\n", $2 - $1}' >> "$out/race-$p.s"
            [ -f "$db" ] && run "$out/race-$p-$i.check" check "$db"
            grep -hoE 'max rel error [^ ]* against' "$log" >> "$out/race-$p.err"
        done
        local verdict findings differ
        verdict=$(grep -hoE 'outputs (match|DIFFER)' "$out"/race-$p-*.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')
        findings=$(for f in "$out"/race-$p-*.check; do head -1 "$f" | sed 's/ in [0-9]* statements//; s/:.*//'; done | paste -sd, -)
        differ=$(sort -u "$out/race-$p.err" 2> /dev/null | wc -l)
        note "race $p: wall $(tr '\n' ' ' < "$out/race-$p.s")s (median $(median < "$out/race-$p.s")); $verdict" \
             "check per run: $findings; $differ distinct max rel errors over the runs" \
             "($( [ "$differ" -gt 1 ] && echo 'the outputs differ from run to run' || echo 'the same error in every run'))"
    done
}

step_calibrate() {
    local fit=$out/decode-events-1.db other=$out/decode-full-1.db dev=$out/gpu.dev
    [ -s "$out/decode-events.ms" ] && [ -s "$out/decode-full.ms" ] && [ -f "$fit" ] && [ -f "$other" ] ||
        { note "calibrate: no complete events and full decode runs in $out (the decode step first)"; return; }
    run "$out/calibrate.log" calibrate "$fit" -o "$dev" --validate "$other"
    note "calibrate: fitted on events run 1, validated on full run 1:"
    grep -E 'makespan' "$out/calibrate.log" | sed 's/^ */  /' | tee -a "$out/summary.txt"
    [ -f "$dev" ] || return
    rm -f "$out/sim.db"
    run "$out/sim.log" run --model "$model" --devices "$dev:gpus=2" --copies 2 --policy events --tokens "$tokens" \
        --prompt 32 -o "$out/sim.db"
    local sim measured
    sim=$(sed -n 's/^decode: \([0-9.]*\) ms\/token.*/\1/p' "$out/sim.log")
    measured=$(median < "$out/decode-events.ms")
    note "simulator with $dev: ${sim:-?} ms/token for events, measured median $measured" \
         "($(awk -v s="${sim:-0}" -v m="$measured" 'BEGIN {if (m > 0 && s > 0) printf "%+.1f %%", (s - m) / m * 100; else print "no figure"}'))"
}

for s in $steps; do
    case $s in
    tests | decode | race | calibrate) "step_$s" ;;
    *) die "unknown step '$s' (expected tests decode race calibrate)" ;;
    esac
done
echo "cuda-backend.sh: done; $out/summary.txt"
