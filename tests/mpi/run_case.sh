#!/bin/sh
# run_case.sh SYNCSIM MPIRUN N CASE DIR -- one test of real ranks over MPI
# (ctest mpi/CASE-Nranks, docs/multi-rank.md "Real ranks over MPI"): run a
# tensor-parallel model as N processes with MPIRUN (scripts/mpirun: the one
# place with the mpirun flags), merge the ranks' databases, check the job
# and assert what each case must give. Exit 77 (ctest: skipped) with one line
# when there is no mpirun or this syncsim was built without MPI.
#   clean                 every rank's outputs match the reference exactly;
#                         rank= and world_size= in each database; the merged
#                         job checks clean
#   rank-skips-allreduce  the last rank leaves out an all-reduce: a rank ends
#                         with the one-line error, every database stays, and
#                         check finds the hang naming the rank that skipped
#   isend-buffer-reused   ranks 1.. write their send buffer before MPI_Wait:
#                         check finds the WAR race of each such rank's send
# and a llama model as a pipeline of N stages (run --pp N), one per process:
#   pp-clean              every stage's output (the last one's: the logits)
#                         matches the reference exactly; each activation is
#                         one send and one recv; the merged job checks clean
#   pp-activation-buffer-reused
#                         stages 0..N-2 stage the next activation into their
#                         send buffer before MPI_Wait: check finds the WAR
#                         race of each such rank's send and proposes the wait
set -u
syncsim=$1 mpirun=$2 n=$3 case=$4 dir=$5
command -v mpirun >/dev/null 2>&1 || { echo "skip: no mpirun on PATH (scripts/setup installs openmpi-bin)"; exit 77; }
work="$dir/$case-${n}ranks"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($case, $n ranks): $*"; exit 1; }
model="tp:n_layer=2,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=64,n_ctx=32"
split="--tp"
case $case in pp-*)         # 4 layers: one stage each at 4 ranks, two at 2
    model="llama:n_layer=4,n_embd=64,n_head=4,n_head_kv=4,n_ff=128,n_vocab=96,n_ctx=32"
    split="--pp" ;;
esac
set -- run --model "$model" --devices cpustream:1 "$split" "$n" --tokens 3 --prompt 8 -o 'job.r%d.db'
case $case in
clean|pp-clean) ;;
pp-activation-buffer-reused) set -- "$@" --break activation-buffer-reused ;;
rank-skips-allreduce) set -- "$@" --break rank-skips-allreduce --allreduce-timeout 3000 ;;
isend-buffer-reused) set -- "$@" --break isend-buffer-reused ;;
*) fail "unknown case" ;;
esac
"$mpirun" "$n" "$syncsim" "$@" > run.log 2>&1
rc=$?
cat run.log
if grep -q "built without MPI" run.log; then
    echo "skip: this syncsim was built without MPI (-DSYNCSIM_MPI=OFF, or no MPI found)"
    exit 77
fi
! grep -q "Sanitizer\|runtime error" run.log || fail "a rank reported a sanitizer error"
files=""
r=0
while [ "$r" -lt "$n" ]; do
    [ -s "job.r$r.db" ] || fail "rank $r left no database job.r$r.db"
    "$syncsim" info "job.r$r.db" > "info.r$r" 2>&1 || fail "rank $r's database is unreadable"
    grep -q "meta rank = $r\$" "info.r$r" || fail "rank $r's run has no rank=$r"
    grep -q "meta world_size = $n\$" "info.r$r" || fail "rank $r's run has no world_size=$n"
    files="$files job.r$r.db"
    r=$((r + 1))
done
"$syncsim" merge $files -o job.db || fail "merge failed"
"$syncsim" check job.db > check.log 2>&1
crc=$?
cat check.log
# A correct job: mpirun succeeded, every rank (WHO: ranks or stages) matched
# the reference, the merged job is clean, and it has k = (n-1) x 4 sends and
# recvs (4 evaluations: 1 prompt ubatch, 3 tokens).
expect_clean_job() {
    [ "$rc" -eq 0 ] || fail "mpirun exited $rc"
    m=$(grep -c "outputs match exactly" run.log)
    [ "$m" -eq "$n" ] || fail "$m of $n $1 say 'outputs match exactly'"
    [ "$crc" -eq 0 ] && grep -q "^job.db (run 1): clean:" check.log || fail "the merged job does not check clean"
    k=$(( (n - 1) * 4 ))
    "$syncsim" info job.db | grep -q "send $k, recv $k)" || fail "the job has not $k sends and $k recvs"
}
case $case in
clean)
    # Ranks 1.. send each of the 4 evaluations' outputs to rank 0 (1 prompt
    # ubatch, 3 tokens), which receives and compares them.
    expect_clean_job ranks
    grep -q "ranks: $k outputs of the other $((n - 1)) ranks\{0,1\} received over MPI, $k bit-identical" run.log ||
        fail "rank 0 did not receive $k bit-identical outputs"
    ;;
rank-skips-allreduce)
    [ "$rc" -ne 0 ] || fail "the seeded run exited 0"
    grep -q "waited [0-9.]*s in MPI_Iallgather\|MPI_Iallgather failed" run.log ||
        fail "no rank ended with the one-line all-reduce error"
    [ "$crc" -eq 1 ] || fail "check exited $crc, expected 1"
    last=$((n - 1))
    # The other ranks wait at a generation the last rank never reaches.
    grep -q "^job.db:.*error: hang: .*waits for collective tp generation [0-9]* ($last of $n arrived)" check.log ||
        fail "no hang at a collective with $last of $n ranks arrived"
    ! grep -q "r$last\.cs0 waits for collective" check.log ||
        fail "rank $last, the one that skipped, is named as a waiter"
    [ "$n" -gt 2 ] || grep -q "r$last.cs0 arrived at an earlier generation but not at this one" check.log ||
        fail "the hang's fix does not name rank $last, the one that skipped"
    ;;
isend-buffer-reused)
    # The race need not bite (MPI copies a small message at once): the
    # outputs still match; the checker finds it either way.
    [ "$rc" -eq 0 ] || fail "mpirun exited $rc"
    [ "$crc" -eq 1 ] || fail "check exited $crc, expected 1"
    r=1
    while [ "$r" -lt "$n" ]; do
        grep -q ": error: race: WAR race on r$r\.sendbuf.*isend_output (r$r\.mpi) and stage_output (r$r\.host)" check.log ||
            fail "no WAR race between rank $r's MPI_Isend and its next write of the send buffer"
        r=$((r + 1))
    done
    ;;
pp-clean)
    # Each of the 4 evaluations' activations (1 prompt ubatch, 3 tokens)
    # crosses each of the n-1 stage boundaries once.
    expect_clean_job stages
    r=0
    while [ "$r" -lt "$n" ]; do
        [ "$r" -eq 0 ] || grep -q "^pipeline: stage $r of $n, 4 activations received from rank $((r - 1)) over MPI" run.log ||
            fail "stage $r did not receive 4 activations from rank $((r - 1))"
        [ "$r" -eq $((n - 1)) ] || grep -q "^pipeline: stage $r of $n, 4 activations sent to rank $((r + 1)) over MPI" run.log ||
            fail "stage $r did not send 4 activations to rank $((r + 1))"
        r=$((r + 1))
    done
    # The last stage's outputs are the logits (n_vocab 96 x 11 tokens); the
    # others' the activations (n_embd 64 x 11).
    grep -q "against the reference (cpu, sequential): 1056 values of 4 evaluations" run.log ||
        fail "the last stage did not check the logits"
    [ "$(grep -c "against the reference (cpu, sequential): 704 values of 4 evaluations" run.log)" -eq $((n - 1)) ] ||
        fail "the earlier stages did not each check their activations"
    ;;
pp-activation-buffer-reused)
    [ "$rc" -eq 0 ] || fail "mpirun exited $rc"
    [ "$crc" -eq 1 ] || fail "check exited $crc, expected 1"
    r=0
    while [ "$r" -lt $((n - 1)) ]; do
        grep -q ": error: race: WAR race on r$r\.sendbuf.*isend_activation (r$r\.mpi) and stage_activation (r$r\.host)" check.log ||
            fail "no WAR race between stage $r's MPI_Isend and its next write of the send buffer"
        grep -q "fix: add \"r$r\.host sync r$r\.mpi\" before stage_activation" check.log ||
            fail "the fix for stage $r does not wait for its send"
        r=$((r + 1))
    done
    ! grep -q "r$((n - 1))\.sendbuf" check.log || fail "the last stage, which sends nothing, is named"
    ;;
esac
echo "ok: $case, $n ranks"
