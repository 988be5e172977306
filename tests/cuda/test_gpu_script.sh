#!/bin/sh
# test_gpu_script.sh SCRIPT -- bench/gpu/all.sh, the one device script, where
# there is no GPU: it must stop before any step with one line per missing
# piece (exit 2), writing nothing. Twice: as it is here (no GPU, and a build
# directory that is not pack's), and with a stand-in nvidia-smi that lists a
# GPU, so that the checks after the GPU's are seen one line each. Where a GPU
# is, the script is for running, not for this test: skipped.
set -u
script=$1
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "a GPU is here: bench/gpu/all.sh is to be run (bash build-gpu/on-gpu ...), not tested"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_gpu_script: $*"; exit 1; }

# 1. this machine: no GPU first, then each piece of the build that is missing
OUT=$tmp/out1 BUILD=$tmp/no-build NVCC=$tmp/no-nvcc bash "$script" > "$tmp/o1" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "exit $rc without a GPU, wanted 2: $(cat "$tmp/o1")"
head -1 "$tmp/o1" | grep -q '^all.sh: no GPU: ' || fail "the first line is not the GPU's: $(head -1 "$tmp/o1")"
for piece in "$tmp/no-build/syncsim" libsyncsim_inject.so libsyncsim_cuda.so CTestTestfile.cmake "$tmp/no-nvcc"; do
    [ "$(grep -c "^all.sh: no .*$piece" "$tmp/o1")" = 1 ] || fail "no one line for $piece: $(cat "$tmp/o1")"
done
[ "$(grep -vc '^all.sh: no ' "$tmp/o1")" = 0 ] || fail "lines that name no missing piece: $(cat "$tmp/o1")"
[ -e "$tmp/out1" ] && fail "it wrote $tmp/out1 without a GPU"

# 2. a GPU listed (a stand-in nvidia-smi), nothing else there: one line a piece, no GPU line
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "GPU 0: Stand-in (UUID: GPU-0)"\n' > "$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
PATH=$tmp/bin:$PATH OUT=$tmp/out2 BUILD=$tmp/no-build NVCC=$tmp/no-nvcc bash "$script" > "$tmp/o2" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "exit $rc with a GPU and no build, wanted 2: $(cat "$tmp/o2")"
grep -q 'no GPU' "$tmp/o2" && fail "the stand-in GPU was not taken: $(cat "$tmp/o2")"
[ "$(grep -c '^all.sh: no ' "$tmp/o2")" -ge 5 ] || fail "fewer than five missing pieces said: $(cat "$tmp/o2")"
[ -e "$tmp/out2" ] && fail "it wrote $tmp/out2 with pieces missing"
echo "test_gpu_script: $(wc -l < "$tmp/o1") lines without a GPU, $(wc -l < "$tmp/o2") with one and no build; nothing run"
