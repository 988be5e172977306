#!/bin/sh
# test_sitecustomize.sh SYNCSIM PYTHONDIR -- PyTorch's allocator history
# reaches the event log and narrows kernels to tensors, without a GPU or
# PyTorch: real/cuda/python/sitecustomize.py (in PYTHONDIR) runs under a
# stand-in torch (fake_torch/) whose history is fixed, and the log it
# completes must check as one race on one 512-byte block. Also: nothing is
# recorded before CUDA's first use, and the shadowed sitecustomize still runs.
set -u
syncsim=$1 pydir=$2 here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "no python3: sitecustomize.py not tested"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/other"
echo 'open(__import__("os").environ["MARK"], "w").write("ran")' > "$tmp/other/sitecustomize.py"
log=$tmp/run.cuda-log
# what the injection library would have written (pid 1; the clock pairs
# the log's t0=0 with 5 s after the epoch)
cat > "$log" <<'LOG'
syncsim-cuda-log 1
stream pid=1 dev=0 stream=13 kind=blocking
stream pid=1 dev=0 stream=14 kind=nonblocking
clock pid=1 t0=0 unix=5000000000
api pid=1 tid=1 t0=100000 t1=110000 corr=1 dev=0 ptr=0x10000 size=1048576 name=cudaMalloc
api pid=1 tid=1 t0=200000 t1=201000 corr=2 dev=0 stream=13 name=cudaLaunchKernel
param pid=1 corr=2 idx=0 ptr=0x10000 mode=w
gpu pid=1 corr=2 kind=kernel dev=0 stream=13 t0=205000 t1=206000 name=fill_a
api pid=1 tid=1 t0=207000 t1=207500 corr=3 dev=0 stream=13 event=1 name=cudaEventRecord
api pid=1 tid=1 t0=208000 t1=208500 corr=4 dev=0 stream=14 event=1 name=cudaStreamWaitEvent
api pid=1 tid=1 t0=300000 t1=301000 corr=5 dev=0 stream=13 name=cudaLaunchKernel
param pid=1 corr=5 idx=0 ptr=0x10200 mode=w
gpu pid=1 corr=5 kind=kernel dev=0 stream=13 t0=305000 t1=306000 name=other
api pid=1 tid=1 t0=400000 t1=401000 corr=6 dev=0 stream=14 name=cudaLaunchKernel
param pid=1 corr=6 idx=0 ptr=0x10000 mode=w
gpu pid=1 corr=6 kind=kernel dev=0 stream=14 t0=405000 t1=406000 name=side_use
api pid=1 tid=1 t0=700000 t1=701000 corr=8 dev=0 stream=13 name=cudaLaunchKernel
param pid=1 corr=8 idx=0 ptr=0x10000 mode=w
gpu pid=1 corr=8 kind=kernel dev=0 stream=13 t0=705000 t1=706000 name=new_owner
api pid=1 tid=1 t0=900000 t1=901000 corr=9 dev=0 name=cudaDeviceSynchronize
LOG
cp "$log" "$tmp/untouched.cuda-log"
run() {   # run LOG PYTHON-CODE
    SYNCSIM_CAPTURE_LOG=$1 MARK=$tmp/mark PYTHONPATH="$pydir:$here/fake_torch:$tmp/other" \
        python3 -c "$2" || { echo "python3 failed"; exit 1; }
}
# 1. torch imported, CUDA never used: no history, the shadowed sitecustomize ran
run "$tmp/untouched.cuda-log" "import torch"
[ "$(cat "$tmp/mark" 2>/dev/null)" = ran ] || { echo "the shadowed sitecustomize did not run"; exit 1; }
if grep -q '^block' "$tmp/untouched.cuda-log"; then echo "history recorded before CUDA's first use"; exit 1; fi
# 2. CUDA used: the history is appended as block records, py= outside torch
run "$log" "import torch; torch.cuda.init()"
n=$(grep -c '^block' "$log")
[ "$n" = 6 ] || { echo "expected 6 block records, got $n"; cat "$log"; exit 1; }
grep -q '^block .* action=alloc ptr=0x10200 size=512 py=/work/my_program.py:4$' "$log" ||
    { echo "no block record of C with its Python line"; grep '^block' "$log"; exit 1; }
grep -q '^# syncsim: 1 allocator history entries without time_us' "$log" ||
    { echo "the untimed entry is not noted"; exit 1; }
sed -i 's/^block pid=[0-9]*/block pid=1/' "$log"
# 3. the translation: one race, side_use against new_owner, on block A only
db=$tmp/run.db trace=$tmp/run.trace
"$syncsim" import "$log" -o "$db" >/dev/null && "$syncsim" export "$db" -o "$trace" || exit 1
echo "expect race type=WAW first=side_use second=new_owner" >> "$trace"
"$syncsim" check --expect "$trace"
