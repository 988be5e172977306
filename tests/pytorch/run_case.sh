#!/bin/sh
# run_case.sh SYNCSIM PROGRAM DIR -- one PyTorch corpus test (ctest
# pytorch/NAME): run PROGRAM.py unchanged under `syncsim capture`, write the
# run out as a text trace, check it, and compare the findings with the
# program's `# expect` lines: `# expect clean` wants none; `# expect KIND
# [type=T]` wants at least one finding of that kind (and race type) and no
# finding of a kind not expected (how many a missing wait gives depends on
# how many of PyTorch's kernels it leaves unordered). Fails when no kernel of
# the trace accesses memory, or when the trace does not show what the
# program's `# require` lines say its case is about (tests/cuda/corpus_check.py:
# the kernels on each stream it names, the graph's nodes, the NCCL call and
# the kernel writing its buffer, each with accesses): no vacuous pass. Exit 77 (ctest: skipped) with
# one line without PyTorch or a GPU. SYNCSIM_PYTHON names the interpreter
# (default python3).
set -u
syncsim=$1 prog=$2 dir=$3
py=${SYNCSIM_PYTHON:-python3}
command -v "$py" >/dev/null || { echo "no $py: the PyTorch corpus is skipped"; exit 77; }
"$py" -c 'import torch' 2>/dev/null || { echo "no PyTorch ($py cannot import torch): skipped"; exit 77; }
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "no CUDA device for PyTorch (torch.cuda.is_available() is False): skipped"; exit 77; }
name=$(basename "$prog" .py)
db="$dir/$name.db" log="$dir/$name.cuda-log" trace="$dir/$name.trace" json="$dir/$name.json"
rm -f "$db" "$log" "$trace" "$json"
out=$("$syncsim" capture -o "$db" --log "$log" -- "$py" "$prog" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
case $out in
*"exited with status 77"*) exit 77 ;;
*"exited with status 0"*) ;;
*) echo "run_case: $name did not exit cleanly under capture"; exit 1 ;;
esac
"$syncsim" export "$db" -o "$trace" || exit 1
awk '$1 == "queue" && $3 == "stream" { stream[$2] = 1 }
     $2 == "op" && ($1 in stream) { k++; for (i = 3; i <= NF; i++) if ($i ~ /^(r|w|rw):/) { a++; next } }
     END { if (!a) { printf "run_case: none of %d kernels accesses memory (parameters not captured)\n", k; exit 1 }
           printf "run_case: %d of %d kernels with accesses\n", a, k }' "$trace" || exit 1
"$py" "$(dirname "$0")/../cuda/corpus_check.py" "$trace" "$prog" || exit 1
"$syncsim" check --json "$trace" > "$json"
[ $? -le 1 ] || { echo "run_case: syncsim check failed"; exit 1; }
"$py" - "$prog" "$json" <<'PY'
import json, sys
prog, path = sys.argv[1:3]
want = []
for line in open(prog):
    if line.startswith("# expect "):
        words = line.split()[2:]
        want.append((words[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)))
found = json.load(open(path))["findings"]
def show(f):
    side = lambda s: "%s %s" % (s.get("queue"), (s.get("label") or "")[:60]) if s else "-"
    return "%s %s first=[%s] second=[%s]" % (f["kind"], f.get("type", ""), side(f.get("first")),
                                             side(f.get("second")))
for f in found:
    print("found:", show(f))
ok = True
if any(k == "clean" for k, _ in want):
    ok = not found
else:
    for kind, keys in want:
        if not any(f["kind"] == kind and keys.get("type", "") in (f.get("type") or "")
                   for f in found):
            print("missing: expect", kind, *("%s=%s" % kv for kv in keys.items()))
            ok = False
    kinds = {k for k, _ in want}
    for f in found:
        if f["kind"] not in kinds:
            print("unexpected:", show(f))
            ok = False
print("%s: %s (%d findings)" % (prog, "as expected" if ok else "NOT as expected", len(found)))
sys.exit(0 if ok else 1)
PY
