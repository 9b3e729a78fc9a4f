#!/usr/bin/env bash
# bench/tpc.sh — third-party copy rates (xrdcp --tpc only) between two
# ecstore gateways and between two plain xrootd servers, next to the same
# copies passed through the client (xrdcp SRC DST without --tpc), all on
# this machine in one run. Each gateway serves its own embedded cluster
# (8+2 over 12 local directories, fsync on); each xrootd has ofs.tpc on.
# Rows are alternated REPEATS times and the medians printed, with the
# ratios that matter: a gateway's TPC against the gateway's copy through
# the client, and against xrootd's own TPC. xrdcp learns that a copy
# ended only at its next progress poll (every 2.5 s), so the *-pull rows
# also give the destination gateway's own time for the pull (its log).
#
# Usage: bench/tpc.sh [SIZE_MIB]      (default 1024)
# Environment: BENCH_DIR (default /var/tmp), ECSTORE_BIN (default
# bin/ecstore from `make build`), REPEATS (default 3).
# Needs: xrdcp, xrootd (scripts/install-deps.sh installs them).
set -euo pipefail

size_mib="${1:-1024}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ecstore="${ECSTORE_BIN:-$repo/bin/ecstore}"
repeats="${REPEATS:-3}"
work="$(mktemp -d "${BENCH_DIR:-/var/tmp}/ecstore-tpc-XXXXXX")"
chmod 755 "$work"
# Servers are started inside $(...), a subshell: their PIDs go to a file.
cleanup() {
  if [ -f "$work/pids" ]; then
    while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/pids"
    sleep 0.5
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_gateway() { # name -> port
  local port
  port="$(free_port)"
  mkdir -p "$work/$1"
  "$ecstore" serve --data "$work/$1/data" --root-addr "127.0.0.1:$port" --metrics-addr "" --log-level info >"$work/$1.log" 2>&1 &
  echo $! >>"$work/pids"
  echo "$port"
}

start_xrootd() { # name -> port
  local port dir="$work/$1"
  port="$(free_port)"
  mkdir -p "$dir/data" "$dir/admin"
  cat >"$dir/xrootd.cf" <<EOF
xrd.port $port
all.export /
oss.localroot $dir/data
all.adminpath $dir/admin
all.pidpath $dir/admin
xrootd.chksum adler32
ofs.tpc pgm $(command -v xrdcp) --server
EOF
  local run=()
  if [ "$(id -u)" = 0 ]; then
    chown -R xrootd "$dir/data" "$dir/admin"
    run=(-R xrootd)
  fi
  xrootd -c "$dir/xrootd.cf" -l "$dir/admin/xrootd.log" "${run[@]}" >"$dir/out.log" 2>&1 &
  echo $! >>"$work/pids"
  echo "$port"
}

wait_port() {
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "tpc.sh: nothing listens on $1" >&2
  exit 1
}

g0="$(start_gateway gw0)"
g1="$(start_gateway gw1)"
x0="$(start_xrootd x0)"
x1="$(start_xrootd x1)"
for p in "$g0" "$g1" "$x0" "$x1"; do wait_port "$p"; done

src="$work/src.bin"
head -c "$((size_mib << 20))" /dev/urandom >"$src"
xrdcp -s "$src" "root://127.0.0.1:$g0//src"
xrdcp -s "$src" "root://127.0.0.1:$x0//src"

# copy ROW ARGS...: one timed xrdcp, its MB/s appended to $work/ROW.
copy() {
  local row="$1"
  shift
  local t0 t1
  t0="$(date +%s.%N)"
  xrdcp -s -f "$@"
  t1="$(date +%s.%N)"
  echo "$t0 $t1" | awk -v b="$((size_mib << 20))" '{ printf "%.1f\n", b / ($2 - $1) / 1e6 }' >>"$work/$row"
}

# pulled ROW: the MB/s of the last pull gw1 logged (its own bytes / took),
# appended to $work/ROW: the copy without xrdcp's polling (below).
pulled() {
  grep -a 'third-party copy pulled' "$work/gw1.log" | tail -n 1 |
    sed -E 's/.* bytes=([0-9]+) took=([0-9.]+)(ms|s).*/\1 \2 \3/' |
    awk '{ t = ($3 == "ms") ? $2 / 1000 : $2; printf "%.1f\n", $1 / t / 1e6 }' >>"$work/$1"
}

rows=(xrootd-tpc xrootd-client gw-tpc gw-tpc-pull gw-client xrootd-to-gw-tpc xrootd-to-gw-pull gw-to-xrootd-tpc)
for _ in $(seq "$repeats"); do
  copy xrootd-tpc --tpc only "root://127.0.0.1:$x0//src" "root://127.0.0.1:$x1//dst"
  copy xrootd-client "root://127.0.0.1:$x0//src" "root://127.0.0.1:$x1//dst"
  copy gw-tpc --tpc only "root://127.0.0.1:$g0//src" "root://127.0.0.1:$g1//dst"
  pulled gw-tpc-pull
  copy gw-client "root://127.0.0.1:$g0//src" "root://127.0.0.1:$g1//dst"
  copy xrootd-to-gw-tpc --tpc only "root://127.0.0.1:$x0//src" "root://127.0.0.1:$g1//dst2"
  pulled xrootd-to-gw-pull
  copy gw-to-xrootd-tpc --tpc only "root://127.0.0.1:$g0//src" "root://127.0.0.1:$x1//dst2"
done

median() { sort -n "$work/$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "# ${size_mib} MiB, medians of $repeats (MB/s, each row: all runs)"
for r in "${rows[@]}"; do
  printf '%-18s %8s   (%s)\n' "$r" "$(median "$r")" "$(paste -sd' ' "$work/$r")"
done
awk -v a="$(median gw-tpc)" -v p="$(median gw-tpc-pull)" -v b="$(median gw-client)" -v c="$(median xrootd-tpc)" 'BEGIN {
  printf "gateway TPC / gateway through the client:      x%.2f\n", a / b
  printf "gateway pull alone / gateway through the client: x%.2f\n", p / b
  printf "gateway TPC / xrootd TPC:                      x%.2f\n", a / c
}'
echo "(xrdcp learns that a copy ended at its next progress poll, every 2.5 s:"
echo " the *-tpc rows are rounded up to it; the *-pull rows are the destination"
echo " gateway's own time for the pull, from its log)"
