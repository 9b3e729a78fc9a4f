#!/usr/bin/env bash
# demo.sh BIN DATA — what `make run` does until the gateway (`ecstore serve`)
# exists: store a generated ~20 MiB file in the embedded cluster at DATA
# (created on first use: 8+2, 1 MiB chunks, 12 node directories), list it,
# stat it, read it back and compare it with the original.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BIN DATA" >&2
  exit 2
fi
bin=$1
data=$2
obj=/demo/sample.bin

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { printf '\n==> %s\n' "$*"; }

step "generating a 20 MiB + 12345 byte file of random data"
head -c $((20 * 1024 * 1024 + 12345)) /dev/urandom >"$work/sample.bin"
ls -l "$work/sample.bin" | awk '{print "    " $5 " bytes"}'

if [ ! -e "$data/ecstore.conf" ]; then
  step "the first put creates the embedded cluster in $data"
fi
step "$bin put -f --data $data $work/sample.bin $obj"
"$bin" put -f --data "$data" "$work/sample.bin" "$obj"   # -f: a second run replaces it

step "$bin ls -l --data $data /demo"
"$bin" ls -l --data "$data" /demo

step "$bin stat --data $data $obj"
"$bin" stat --data "$data" "$obj"

step "$bin get --data $data $obj $work/back.bin"
"$bin" get --data "$data" "$obj" "$work/back.bin"

step "cmp original read-back"
if cmp "$work/sample.bin" "$work/back.bin"; then
  printf '\nOK: %s read back bit-exact from %s (%s archives under %s/nodes).\n' \
    "$obj" "$data" "$(find "$data/nodes" -path "*$obj" -type f | wc -l)" "$data"
  echo "Try: delete any two archives of it (find $data/nodes -path '*$obj') and get it again."
else
  echo "FAILED: the object read back differs from the file stored" >&2
  exit 1
fi
