#!/bin/sh
# shim_nccl.sh SHIM PROGRAM -- the cuBLAS/NCCL shim (real/cuda/shim.c,
# preloaded) names a communicator that PyTorch created with
# ncclCommInitRankConfig (non-blocking: ncclInProgress), or split, by the
# id every rank computes alike, not by its handle: PROGRAM runs on a
# stand-in libnccl (fake_nccl.c) and prints the two ids its collectives'
# `lib` records must carry. No GPU, no NCCL.
set -u
shim=$1 prog=$2
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
want=$(SYNCSIM_CAPTURE_LOG=$log LD_PRELOAD=$shim "$prog") || { echo "$prog failed"; exit 1; }
set -- $want
for comm in "$1" "$2"; do
    n=$(grep -c "^lib .* comm=$comm ranks=[0-9]* name=ncclAllReduce$" "$log")
    [ "$n" = 1 ] || { echo "expected one ncclAllReduce on comm=$comm, the log has:"; cat "$log"; exit 1; }
done
echo "shim_nccl: both communicators named by their ids ($want)"
