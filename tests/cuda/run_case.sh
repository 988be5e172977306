#!/bin/sh
# run_case.sh SYNCSIM PROBE PROGRAM SOURCE DIR -- one corpus test (ctest
# cuda/NAME): record PROGRAM with `syncsim capture`, write the run out as a
# text trace, append the `// expect ...` lines of SOURCE as expect lines and
# let `syncsim check --expect` compare. Exit 77 (ctest: skipped) with one line
# when there is no usable GPU, or too few for the program.
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
sed -n 's|^// expect |expect |p' "$src" >> "$trace"
"$syncsim" check --expect "$trace"
