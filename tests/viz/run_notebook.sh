#!/bin/sh
# tests/viz/run_notebook.sh NOTEBOOK OUTDIR -- executes a notebook with
# Debian's Jupyter (/usr/bin/jupyter and its python3 kernel) so that it
# cannot rot. SYNCSIM (the binary) comes from the environment. Exits 77
# (ctest: skipped) with a reason when Jupyter or a package is missing.
set -eu
nb=$1
out=$2
for tool in /usr/bin/jupyter /usr/bin/python3; do
    [ -x "$tool" ] || { echo "skipped: $tool is missing (apt-get install jupyter-nbconvert python3-ipykernel)"; exit 77; }
done
/usr/bin/python3 -c 'import nbconvert, ipykernel, pandas, matplotlib' 2>/dev/null || {
    echo "skipped: Debian's python3 lacks nbconvert, ipykernel, pandas or matplotlib (scripts/setup installs them)"
    exit 77
}
mkdir -p "$out"
# The notebook's scratch files (tempfile.mkdtemp) go to a folder removed at the end.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Debian's python first: the kernel must be the one with the packages, not a pyenv python3.
PATH=/usr/bin:$PATH TMPDIR=$scratch PYDEVD_DISABLE_FILE_VALIDATION=1 /usr/bin/jupyter nbconvert \
    --to notebook --execute --ExecutePreprocessor.timeout=600 \
    --ExecutePreprocessor.kernel_name=python3 --output-dir "$out" "$nb"
