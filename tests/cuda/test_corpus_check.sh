#!/bin/sh
# test_corpus_check.sh SYNCSIM CHECKER TESTS -- corpus_check.py on traces
# written here: each requirement word passes on a trace that shows the case
# and fails on one that does not (the vacuous pass the corpus must not have),
# and a program without a `require` line fails. Every corpus program under
# TESTS (cuda/*.cu, pytorch/*.py) states requirements the checker knows. No GPU.
set -u
syncsim=$1 checker=$2 tests=$3
command -v python3 >/dev/null || { echo "no python3: corpus_check.py not tested"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_corpus_check: $*"; exit 1; }
# expect STATUS REQUIRE TRACE-TEXT: the checker's exit status for that trace
expect() {
    want=$1 req=$2
    printf '%s\n' "$3" > "$tmp/t.trace"
    printf '// require %s\n' "$req" > "$tmp/prog.cu"
    python3 "$checker" "$tmp/t.trace" "$tmp/prog.cu" > "$tmp/out" 2>&1
    got=$?
    [ "$got" = "$want" ] || fail "require $req: exit $got, wanted $want: $(cat "$tmp/out") on:
$3"
}
HEAD='syncsim-trace 1
queue host.1.1 host
queue gpu0.s13 stream device=gpu0
queue gpu0.s14 stream device=gpu0
buffer gpu0.b0 size=4096 device=gpu0
buffer gpu0.b0.t1 in=gpu0.b0 offset=1024 size=512'

# streams=N: kernels with accesses on N streams
expect 0 streams=2 "$HEAD
gpu0.s13 op \"produce(float*)\" w:gpu0.b0
gpu0.s14 op \"consume(float const*)\" r:gpu0.b0[0:64]"
expect 1 streams=2 "$HEAD
gpu0.s13 op \"produce(float*)\" w:gpu0.b0
gpu0.s14 op \"consume(float const*)\""

# overlap: a write and an access of the same bytes on two queues (views resolved)
expect 0 overlap "$HEAD
gpu0.s13 op produce w:gpu0.b0[1100:1200]
gpu0.s14 op consume r:gpu0.b0.t1[0:512]"
expect 1 overlap "$HEAD
gpu0.s13 op produce w:gpu0.b0[0:1024]
gpu0.s14 op consume r:gpu0.b0.t1"
expect 1 overlap "$HEAD
gpu0.s13 op reader r:gpu0.b0
gpu0.s14 op reader2 r:gpu0.b0"

# host-overlap: an NVTX mark's host access and a copy on the same bytes
expect 0 host-overlap "$HEAD
buffer pinned.b1 size=4096 host pinned
gpu0.s13 copy \"Memcpy DtoH\" gpu0.b0 pinned.b1
host.1.1 op \"read result\" r:pinned.b1[0:4096]"
expect 1 host-overlap "$HEAD
buffer pinned.b1 size=4096 host pinned
gpu0.s13 copy \"Memcpy DtoH\" gpu0.b0 pinned.b1"

# collective: the NCCL statement accesses memory a kernel on another stream writes
expect 0 collective "$HEAD
gpu0.s13 op backward w:gpu0.b0[0:2048]
gpu0.s14 collective nccl.ab allreduce size=1 rw:gpu0.b0[0:2048] label=ncclAllReduce"
expect 1 collective "$HEAD
gpu0.s13 op backward w:gpu0.b0[0:2048]
gpu0.s14 collective nccl.ab allreduce size=1 label=ncclAllReduce"
expect 1 collective "$HEAD
gpu0.s13 op backward w:gpu0.b0[0:2048]
gpu0.s14 collective nccl.ab allreduce size=1 rw:gpu0.b0[2048:4096] label=ncclAllReduce"

# graph-nodes: every kernel of a replayed graph accesses memory (counted by
# the cuda-log reader: a log imported and exported as run_case.sh does)
graph() {   # graph LOG-PARAMS: a graph launch of two nodes
    cat > "$tmp/g.cuda-log" <<LOG
syncsim-cuda-log 1
api pid=1 tid=1 t0=10 t1=11 corr=1 dev=0 ptr=0x1000 size=4096 name=cudaMalloc
api pid=1 tid=1 t0=21 t1=22 corr=3 dev=0 stream=13 name=cudaGraphLaunch
$1
gpu pid=1 corr=3 kind=kernel dev=0 stream=13 t0=30 t1=40 node=1 name=mul(float const*, float*)
gpu pid=1 corr=3 kind=kernel dev=0 stream=13 t0=41 t1=45 node=2 name=copy(float const*, float*)
api pid=1 tid=1 t0=50 t1=60 corr=4 dev=0 name=cudaDeviceSynchronize
LOG
    rm -f "$tmp/g.db"
    "$syncsim" import "$tmp/g.cuda-log" -o "$tmp/g.db" > /dev/null &&
        "$syncsim" export "$tmp/g.db" -o "$tmp/g.trace" || fail "the graph log did not import"
    cat "$tmp/g.trace"
}
expect 0 graph-nodes "$(graph 'param pid=1 corr=3 node=1 idx=1 ptr=0x1000
param pid=1 corr=3 node=2 idx=0 ptr=0x1000')"
expect 1 graph-nodes "$(graph 'param pid=1 corr=3 node=1 idx=1 ptr=0x1000')"
expect 1 graph-nodes "$HEAD
gpu0.s13 op produce w:gpu0.b0"

# several words on one line, all must hold; no require line at all fails
expect 1 "streams=3 overlap" "$HEAD
gpu0.s13 op produce w:gpu0.b0
gpu0.s14 op consume r:gpu0.b0"
expect 0 "streams=2 overlap" "$HEAD
gpu0.s13 op produce w:gpu0.b0
gpu0.s14 op consume r:gpu0.b0[0:8]"
printf 'syncsim-trace 1\n' > "$tmp/t.trace"
printf '// expect clean\n' > "$tmp/prog.cu"
python3 "$checker" "$tmp/t.trace" "$tmp/prog.cu" > "$tmp/out" 2>&1 && fail "a program without a require line passed"
for prog in "$tests"/cuda/*.cu "$tests"/pytorch/*.py; do
    case $(basename "$prog") in probe.cu | corpus.py) continue ;; esac
    python3 "$checker" "$tmp/t.trace" "$prog" > "$tmp/out" 2>&1
    grep -q 'unknown requirement\|states no .require. line' "$tmp/out" &&
        fail "$prog: $(grep 'unknown requirement\|states no' "$tmp/out" | head -1)"
done
echo "test_corpus_check: every requirement passes on its case and fails on a vacuous trace;" \
     "every corpus program states what its trace must show"
