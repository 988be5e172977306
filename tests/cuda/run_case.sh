#!/bin/sh
# run_case.sh SYNCSIM PROBE PROGRAM SOURCE DIR -- one corpus test (ctest
# cuda/NAME): record PROGRAM with `syncsim capture`, write the run out as a
# text trace, append the `// expect ...` lines of SOURCE as expect lines and
# let `syncsim check --expect` compare. Fails when a program that launches
# kernels has none in its trace, or one without an access, or when the
# trace does not show what SOURCE's `// require` lines say its case is about
# (corpus_check.py: the streams it names, the bytes both sides touch): no
# vacuous pass.
# Exit 77 (ctest: skipped) with one line when there is no usable GPU, or too
# few for the program.
set -u
syncsim=$1 probe=$2 prog=$3 src=$4 dir=$5
"$probe" || exit $?
name=$(basename "$prog")
db="$dir/$name.db" log="$dir/$name.cuda-log" trace="$dir/$name.trace"
rm -f "$db" "$log" "$trace"
out=$("$syncsim" capture -o "$db" --log "$log" -- "$prog") || { echo "$out"; exit 1; }
echo "$out"
case $out in
*"exited with status 77"*) exit 77 ;;        # the program's own line says why
*"exited with status 0"*) ;;
*) echo "run_case: $name did not exit cleanly"; exit 1 ;;
esac
"$syncsim" export "$db" -o "$trace" || exit 1
# No vacuous pass: a program that launches kernels has kernels in its trace,
# and each that takes a pointer (a '*' in its demangled signature) accesses
# memory (a kernel without its pointer parameters can neither race nor be
# used after a free, so every verdict would be clean).
if grep -q '<<<' "$src"; then
    awk '$1 == "queue" && $3 == "stream" { stream[$2] = 1 }
         $2 == "op" && ($1 in stream) && /\*/ { k++; for (i = 3; i <= NF; i++) if ($i ~ /^(r|w|rw):/) { a++; next } }
         END { if (!k) { print "run_case: no kernel with a pointer parameter in the trace"; exit 1 }
               if (a < k) { printf "run_case: %d of %d kernels access nothing (parameters not captured)\n", k - a, k; exit 1 }
               printf "run_case: %d kernels, each with accesses\n", k }' "$trace" || exit 1
fi
command -v python3 >/dev/null || { echo "run_case: no python3 to run corpus_check.py"; exit 1; }
python3 "$(dirname "$0")/corpus_check.py" "$trace" "$src" || exit 1
sed -n 's|^// expect |expect |p' "$src" >> "$trace"
"$syncsim" check --expect "$trace"
