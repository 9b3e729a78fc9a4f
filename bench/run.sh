#!/usr/bin/env bash
# bench/run.sh — the ecstore benchmark suite (issue 5): in one run on this
# machine it measures
#   1. the machine's limits: loopback TCP (1 and 8 streams), sequential
#      write (with and without fsync) and cold read of the file system that
#      holds the node directories (one file, and 8 files at once for the
#      8-stream rows), memcpy (bench/limits);
#   2. the baseline: one plain real xrootd server, xrdcp put/get and
#      `ecstore bench --mode small` against it;
#   3. ecstore 8+2 / 1 MiB on 10 `ecstore node` processes and on 10 local
#      directories: xrdcp put/get, get with 2 nodes gone, get with 1 node
#      SIGSTOPped, small objects at concurrency 1/8/64, 8 parallel streams,
#      the gateway's peak RSS, random 30 KB reads (as ROOT's);
# and writes one table (bench/report), with the machine's description and
# the limit arithmetic, to bench/RESULTS.md.
#
# Usage: bench/run.sh [--quick] [--out FILE]
#   --quick     smaller sizes (256 MiB, 8 × 32 MiB, short phases): a smoke
#               check of about two minutes; writes
#               $BENCH_DIR/ecstore-bench-quick-RESULTS.md unless --out is given
#   --out FILE  where to write the Markdown (default bench/RESULTS.md); the
#               raw measurements go next to it (FILE without .md, plus .tsv)
# Environment:
#   BENCH_DIR    where the working directory (node directories, xrootd's
#                data, test files) is made; default /var/tmp. Use a real
#                disk, not tmpfs. Only the directory the script makes
#                inside it is removed at the end.
#   ECSTORE_BIN  the ecstore binary (default bin/ecstore from `make build`)
#   BENCH_KEEP=1 keep the working directory (logs) at the end
#   BENCH_REPEATS=N  runs per single transfer and per 8-stream row, of
#                which the table shows the median (default 3; 1 with --quick)
#
# Needs: go, xrdcp, xrdfs, xrootd (scripts/install-deps.sh installs them),
# coreutils. As root, xrootd runs as user xrootd (-R), as in test/interop.
# Every process the script starts is killed by its PID at exit.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

quick=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) [ $# -ge 2 ] || usage 2; out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage 2 ;;
  esac
  shift
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ecstore="${ECSTORE_BIN:-$repo/bin/ecstore}"
base="${BENCH_DIR:-/var/tmp}"

if [ "$quick" = 1 ]; then
  size_h=256MiB size=$((256 << 20))
  stream_h=32MiB stream=$((32 << 20))
  small_dur=2s small_phase=0.5s
  limit_h=256MiB limit_repeats=1 reps=1
  out="${out:-$base/ecstore-bench-quick-RESULTS.md}"
else
  size_h=1GiB size=$((1 << 30))
  stream_h=256MiB stream=$((256 << 20))
  small_dur=20s small_phase=5s
  limit_h=1GiB limit_repeats=3 reps=3
  out="${out:-$repo/bench/RESULTS.md}"
fi
nstreams=8
# BENCH_REPEATS: how many runs the median of a single transfer or an
# 8-stream row is taken over (default 3, 1 with --quick)
reps="${BENCH_REPEATS:-$reps}"
case "$reps" in '' | *[!0-9]* | 0) echo "run.sh: BENCH_REPEATS must be a positive number" >&2; exit 2 ;; esac

say() { printf '%s run.sh: %s\n' "$(date +%T)" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# --- tools -----------------------------------------------------------------
missing=()
for t in go xrdcp xrdfs xrootd timeout sync awk df; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ "${#missing[@]}" -gt 0 ]; then
  die "missing tools: ${missing[*]} (run scripts/install-deps.sh, or make deps)"
fi
[ -x "$ecstore" ] || die "no ecstore binary at $ecstore (run make build, or set ECSTORE_BIN)"
xrootd_user=""
if [ "$(id -u)" = 0 ]; then
  for u in xrootd nobody; do
    if id "$u" >/dev/null 2>&1; then xrootd_user="$u"; break; fi
  done
  [ -n "$xrootd_user" ] || die "running as root and no user xrootd or nobody to run xrootd as"
fi

# --- working directory and cleanup -----------------------------------------
mkdir -p "$base"
work="$(mktemp -d "$base/ecstore-bench.XXXXXX")"
chmod 755 "$work" # xrootd runs as another user and must reach its directory
pids=()           # every process started and not yet reaped
mounts=()         # FUSE mounts to undo before the working directory goes

forget() { # forget PID: drop it from pids
  local keep=() p
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  pids=("${keep[@]}")
}

cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  # TERM first, so that timeout(1) passes it on to its xrdcp; then KILL
  for p in "${pids[@]}"; do
    kill -CONT "$p" 2>/dev/null || true
    kill -TERM "$p" 2>/dev/null || true
  done
  [ "${#pids[@]}" -eq 0 ] || sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for p in "${mounts[@]}"; do unmount "$p"; done
  if [ "${BENCH_KEEP:-0}" = 1 ]; then
    say "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
# unmount DIR: undo a FUSE mount, even one whose server is gone
unmount() {
  umount -l "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || fusermount -uz "$1" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export XRD_CONNECTIONWINDOW=5 XRD_CONNECTIONRETRY=2 XRD_REQUESTTIMEOUT=300 XRD_STREAMTIMEOUT=300
tool_timeout=900 # seconds, for every external transfer

results="$work/results.tsv"
: >"$results"
failed=0
record() { printf '%s\t%s\n' "$1" "$2" >>"$results"; }
fail() { # fail KEY MESSAGE: the measurement KEY failed
  say "FAILED $1: $2"
  record "$1" "$2"
  failed=1
}
now() { date +%s%N; }
mbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b / 1e6 / (ns / 1e9) }'; }

started_at=$(now)

# --- CPU accounting -----------------------------------------------------------
# Every timed single transfer and 8-stream row also records the CPU the
# whole machine spent while it ran (every process and the kernel, from
# /proc/stat) per GB moved (KEY.cpu), the share of the cores busy
# meanwhile (KEY.busy), and the CPU of the server processes per GB: the
# gateway or xrootd (KEY.srvcpu) and the ecstore nodes (KEY.nodecpu).
# On a machine whose every hop shares the same cores, a row near 100 %
# busy is bound by the CPU its path needs, whatever the disk and
# loopback rates; the CPU per GB compares the work of each path with the
# loopback transfer's own (L1, L2).
clk_tck="$(getconf CLK_TCK)"
cpu_server=() # PIDs counted in KEY.srvcpu: the gateway, or xrootd
cpu_nodes=()  # PIDs counted in KEY.nodecpu: the ecstore nodes
# pid_ticks PID: the user and system ticks a process has used (0 once gone)
pid_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# cpu_sample: print "busy total server nodes" ticks as of now (busy and
# total over all cores)
cpu_sample() {
  local s=0 n=0 p
  for p in "${cpu_server[@]}"; do s=$((s + $(pid_ticks "$p"))); done
  for p in "${cpu_nodes[@]}"; do n=$((n + $(pid_ticks "$p"))); done
  awk -v s="$s" -v n="$n" '$1 == "cpu" { b = $2 + $3 + $4 + $7 + $8; print b, b + $5 + $6 + $9, s, n; exit }' /proc/stat
}
# cpu_add ACC BEFORE AFTER: add the ticks between two cpu_samples to the
# array named ACC (4 numbers, as cpu_sample's)
cpu_add() {
  local -n cpu_acc_ref="$1"
  local b a i
  read -ra b <<<"$2"
  read -ra a <<<"$3"
  for i in 0 1 2 3; do cpu_acc_ref[i]=$((${cpu_acc_ref[i]:-0} + a[i] - b[i])); done
}
# cpu_record KEY BYTES ACC: record KEY.cpu, .busy, .srvcpu and .nodecpu
# from the ticks in ACC, spent moving BYTES
cpu_record() {
  local key="$1" bytes="$2"
  local -n cpu_acc_ref="$3"
  [ "${cpu_acc_ref[1]:-0}" -gt 0 ] || return 0
  record "$key.cpu" "$(per_gb "${cpu_acc_ref[0]}" "$bytes")"
  record "$key.busy" "$(awk -v a="${cpu_acc_ref[0]}" -v t="${cpu_acc_ref[1]}" 'BEGIN { printf "%.2f", a / t }')"
  [ "${#cpu_server[@]}" = 0 ] || record "$key.srvcpu" "$(per_gb "${cpu_acc_ref[2]}" "$bytes")"
  [ "${#cpu_nodes[@]}" = 0 ] || record "$key.nodecpu" "$(per_gb "${cpu_acc_ref[3]}" "$bytes")"
}
# per_gb TICKS BYTES: CPU seconds per GB (10^9 bytes)
per_gb() { awk -v t="$1" -v hz="$clk_tck" -v b="$2" 'BEGIN { printf "%.2f", t / hz / (b / 1e9) }'; }

# --- helper programs --------------------------------------------------------
say "building bench/limits and bench/report"
mkdir -p "$work/bin"
(cd "$repo" && go build -o "$work/bin/limits" ./bench/limits && go build -o "$work/bin/report" ./bench/report)
limits="$work/bin/limits"

# --- machine description ----------------------------------------------------
fs_type="$(df -PT "$work" | awk 'NR == 2 { print $2 }')"
fs_dev="$(df -PT "$work" | awk 'NR == 2 { print $1 " mounted on " $7 }')"
record info.mode "$([ "$quick" = 1 ] && echo quick || echo full)"
record info.date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
# The model name alone ("AMD EPYC" on a virtual machine) does not tell
# hosts apart whose checksum and copy speeds differ: family and model, and
# the vector extensions the gateway's checksums use.
cpu_isa="$(awk -F': ' '/^flags/ { n = split($2, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^(avx2|avx512f|vpclmulqdq|gfni|sha_ni)$/) s = s (s ? " " : "") f[i]; print s; exit }' /proc/cpuinfo)"
record info.cpu "$(awk -F': ' '/^model name/ { m = $2 } /^cpu family/ { f = $2 } /^model\t/ { n = $2 } END { printf "%s (family %s, model %s)", m, f, n }' /proc/cpuinfo), ${cpu_isa:-no vector extensions listed}"
record info.cores "$(nproc)"
record info.ram "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
record info.kernel "$(uname -sr)"
record info.fs "$fs_type on $fs_dev"
record info.workdir "$work"
record info.go "$(go version | awk '{ print $3 " " $4 }')"
git_rev="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then git_rev="$git_rev (work tree modified)"; fi
record info.git "$git_rev"
record info.ecstore_version "$("$ecstore" version 2>&1 | head -1)"
record info.xrootd_version "xrootd $(xrootd -v 2>&1 | head -1), xrdcp $(xrdcp --version 2>&1 | head -1)"
record info.load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
record info.size "$size_h"
record info.stream_size "$stream_h"
record info.small_phase "$small_phase"
record info.repeats "$reps"
case "$fs_dev" in
  /dev/vd* | /dev/xvd*)
    record info.note "The node directories are on a virtual disk ($fs_dev): the host may cache it, so the disk limits (L3–L5) and cold reads can exceed what the physical device does; they are still the limits this machine shows." ;;
esac
# ext4 without a journal (jbd2 lists none for the device) checks, for
# every file it creates, that the inode it picks was not freed in the last
# seconds (minutes while its inode table block is dirty), skipping each
# that was: after a phase that removed thousands of files, a create costs
# a scan past them (measured on such a host: 0.23 ms per empty file
# created, 0.5-0.8 ms right after 5000 removals). The small-object puts
# pay it, xrootd's one file per put and ecstore's three archives alike.
fs_name="$(basename "$(df -P "$work" | awk 'NR == 2 { print $1 }')")"
if [ "$fs_type" = ext4 ] && [ -d /proc/fs/jbd2 ] && ! ls /proc/fs/jbd2 2>/dev/null | grep -q "^$fs_name-"; then
  record info.fs "$fs_type (no journal) on $fs_dev"
  record info.note "The node directories are on ext4 without a journal, which checks for every file created that its inode was not freed recently and skips each that was: the small-object puts after a removal phase (theirs and the baseline's) pay a scan past the files just removed, 0.2-0.8 ms of CPU per file created on the host this was written for."
fi
case "$fs_type" in
  tmpfs | ramfs | overlay)
    record info.fs_warning "the node directories are on $fs_type, not a real disk: set BENCH_DIR to a directory on a disk"
    say "WARNING: $work is on $fs_type, not a real disk (set BENCH_DIR)" ;;
esac
say "working in $work ($fs_type on $fs_dev); $([ "$quick" = 1 ] && echo quick || echo full) mode"

# --- 1. machine limits ------------------------------------------------------
# best_of KEY=FIELD[,KEY=FIELD...] ARGS...: run "limits ARGS" limit_repeats
# times and record, for each KEY, the highest value of the output's FIELD
best_of() {
  local spec="$1" i line kf key field v
  shift
  declare -A best=()
  for ((i = 0; i < limit_repeats; i++)); do
    if ! line="$("$limits" "$@" 2>&1)"; then
      for kf in ${spec//,/ }; do fail "${kf%%=*}" "limits $*: $line"; done
      return
    fi
    for kf in ${spec//,/ }; do
      key="${kf%%=*}" field="${kf#*=}"
      v="$(printf '%s\n' "$line" | tr ' ' '\n' | awk -F= -v f="$field" '$1 == f { print $2 }')"
      best[$key]="$(awk -v a="${best[$key]:-0}" -v b="$v" 'BEGIN { print (b + 0 > a + 0 ? b : a) }')"
    done
  done
  for kf in ${spec//,/ }; do
    key="${kf%%=*}"
    record "$key" "${best[$key]}"
    say "$key = ${best[$key]} MB/s"
  done
}
say "1. machine limits"
# the CPU loopback TCP itself needs per GB, for the CPU columns of the
# transfers (bench/limits sends and receives in one process)
for spec in "tcp1 1" "tcp8 $nstreams"; do
  set -- $spec
  tcp_acc=()
  c0="$(cpu_sample)"
  best_of "limit.$1=tcp_mbps" tcp --bytes "$limit_h" --streams "$2"
  cpu_add tcp_acc "$c0" "$(cpu_sample)"
  cpu_record "limit.$1" $((limit_repeats * size)) tcp_acc
done
set --
sync
best_of limit.write=write_mbps disk --dir "$work" --bytes "$limit_h"
sync
best_of limit.write_fsync=write_mbps,limit.read=read_mbps disk --dir "$work" --bytes "$limit_h" --fsync
sync
best_of limit.write_fsync8=write_mbps,limit.read8=read_mbps disk --dir "$work" --bytes "$limit_h" --fsync --files "$nstreams"
best_of limit.memcpy=memcpy_mbps memcpy --bytes 4GiB

# test files, in the page cache for the puts
say "writing the $size_h and $stream_h test files"
src="$work/src.bin"
"$limits" fill --bytes "$size_h" "$src"
ssrc="$work/stream.bin"
"$limits" fill --bytes "$stream_h" "$ssrc"

# --- process helpers ----------------------------------------------------------
# start NAME CMD...: start a process with its output in $work/NAME.log; sets
# the variable started to its PID
start() {
  local name="$1"
  shift
  "$@" >"$work/$name.log" 2>&1 &
  started=$!
  pids+=("$started")
}

# wait_log PID LOGNAME REGEX: wait until the log has a line matching REGEX
# (ERE) and print the first match's text
wait_log() {
  local pid="$1" log="$work/$2.log" re="$3" i m
  for ((i = 0; i < 3000; i++)); do
    if m="$(grep -Eo "$re" "$log" 2>/dev/null | head -1)" && [ -n "$m" ]; then
      printf '%s\n' "$m"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { say "$2 exited:"; tail -20 "$log" >&2; return 1; }
    sleep 0.01
  done
  say "$2 did not log /$re/ within 30 s:"
  tail -20 "$log" >&2
  return 1
}

# stop_proc PID: SIGKILL a process we started and reap it
stop_proc() {
  kill -CONT "$1" 2>/dev/null || true
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget "$1"
}

# waited CMD...: run CMD in the background and wait for it, so that a
# signal to the script interrupts the wait at once (bash runs traps only
# between foreground commands) and the cleanup kills CMD by its PID
waited() {
  local p rc=0
  "$@" &
  p=$!
  pids+=("$p")
  wait "$p" || rc=$?
  forget "$p"
  return "$rc"
}

# xrd ARGS...: xrdcp with a timeout, its output in xrdcp.log
xrd() {
  waited timeout "$tool_timeout" xrdcp --nopbar "$@" >"$work/xrdcp.log" 2>&1
}

# prime URL: one untimed xrdcp get of URL to /dev/null before a timed
# single get, so that the server is timed in its steady state rather than
# in its first transfer of that kind: the first get after a put made the
# gateway fault in about 20 MB of fresh heap (5000 minor faults), which on
# this kind of virtual machine cost 0.3-0.8 s of CPU per GiB (first get
# 724-884 MB/s, the next ones 966-1145). The plain xrootd get has one too.
prime() {
  waited timeout "$tool_timeout" xrdcp --nopbar -f "$1" /dev/null >"$work/prime.log" 2>&1 ||
    say "untimed read of $1 before its timed get failed: $(xrd_error "$work/prime.log")"
}

# xrd_hang PID ARGS...: xrd, with process PID SIGSTOPped 0.2 s into the
# transfer and let go on after it: a server that hangs in the middle of a
# transfer, rather than before it.
xrd_hang() {
  local pid="$1" p rc=0
  shift
  timeout "$tool_timeout" xrdcp --nopbar "$@" >"$work/xrdcp.log" 2>&1 &
  p=$!
  pids+=("$p")
  sleep 0.2
  kill -STOP "$pid"
  wait "$p" || rc=$?
  forget "$p"
  kill -CONT "$pid"
  return "$rc"
}

# xrd_error LOG...: the first error line xrdcp wrote to the logs
xrd_error() {
  local e
  e="$(grep -h -m1 -i 'error' "$@" 2>/dev/null | head -1 || true)"
  printf '%s\n' "${e:-$(tail -qn1 "$@" 2>/dev/null | head -1)}"
}

# timed_xrd KEY BYTES ARGS...: time one xrdcp and record its MB/s; the
# variable elapsed_ns holds the time
timed_xrd() {
  local key="$1" bytes="$2"
  shift 2
  timed "$key" "$bytes" xrd "$@"
}

# timed_xrd_hang KEY BYTES PID ARGS...: timed_xrd through xrd_hang PID
timed_xrd_hang() {
  local key="$1" bytes="$2"
  shift 2
  timed "$key" "$bytes" xrd_hang "$@"
}

# timed KEY BYTES RUNNER ARGS...: time RUNNER ARGS (an xrdcp) once and
# record its MB/s as KEY; the variable elapsed_ns holds the time. For the
# transfers that must happen once (a node stopped in the middle of it).
timed() {
  local key="$1" bytes="$2"
  shift 2
  timed_median "$key" "$bytes" 1 : "$@"
}

# timed_median KEY BYTES N PREP RUNNER ARGS...: run PREP (untimed; `:` for
# nothing) and then time RUNNER ARGS, N times; record the median MB/s as
# KEY, and every run's rate in the note on repeated runs. elapsed_ns holds
# the median time (0 if a run failed: one failed run fails the row).
timed_median() {
  local key="$1" bytes="$2" n="$3" prep="$4" i t0 c0 ns=() rates=() acc=()
  shift 4
  for ((i = 0; i < n; i++)); do
    if ! $prep; then
      fail "$key" "$prep (before run $((i + 1))) failed"
      elapsed_ns=0
      return 1
    fi
    sync
    c0="$(cpu_sample)"
    t0=$(now)
    if ! "$@"; then
      fail "$key" "xrdcp ${*: -3}: $(xrd_error "$work/xrdcp.log")"
      elapsed_ns=0
      return 1
    fi
    ns+=($(($(now) - t0)))
    cpu_add acc "$c0" "$(cpu_sample)"
    rates+=("$(mbps "$bytes" "${ns[-1]}")")
  done
  elapsed_ns="$(median "${ns[@]}")"
  record "$key" "$(mbps "$bytes" "$elapsed_ns")"
  cpu_record "$key" $((n * bytes)) acc
  if [ "$n" -gt 1 ]; then
    runs_note+="${runs_note:+; }$key $(IFS=/; echo "${rates[*]}")"
    say "$key = $(mbps "$bytes" "$elapsed_ns") MB/s (median of ${rates[*]})"
  else
    say "$key = $(mbps "$bytes" "$elapsed_ns") MB/s"
  fi
}

# median NS...: the median of integers (the mean of the middle two of an
# even count)
median() {
  printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# median_xrd KEY BYTES PREP ARGS...: timed_median of reps xrdcp runs
median_xrd() {
  local key="$1" bytes="$2" prep="$3"
  shift 3
  timed_median "$key" "$bytes" "$reps" "$prep" xrd "$@"
}

# xrd_sync FILE ARGS...: xrd ARGS, then fsync FILE (sync FILE)
xrd_sync() {
  local file="$1"
  shift
  xrd "$@" || return
  sync "$file" 2>>"$work/xrdcp.log" || { echo "error: sync $file failed" >>"$work/xrdcp.log"; return 1; }
}

# remover URL: define remove_now, which removes URL (root://host//path)
# if it exists: a PREP that makes every run of a put a create, not an
# overwrite of the previous run's file
remover() {
  rm_host="${1#root://}"
  rm_host="${rm_host%%//*}"
  rm_path="/${1#root://*//}"
}
remove_now() {
  if timeout "$tool_timeout" xrdfs "$rm_host" stat "$rm_path" >/dev/null 2>&1; then
    timeout "$tool_timeout" xrdfs "$rm_host" rm "$rm_path" >/dev/null
  fi
}

# evicter DIR...: define the function evict_now that drops DIR... from the
# page cache (bench/limits evict), a PREP for the cold gets
evicter() {
  evict_dirs=("$@")
}
evict_now() { "$limits" evict "${evict_dirs[@]}" >/dev/null; }

# small KEYPREFIX URL CONCURRENCY [bench flags]: ecstore bench --mode small;
# records KEYPREFIX.cC.OP for put, get and rm
small() {
  local prefix="$1" url="$2" conc="$3" log c op
  shift 3
  log="$work/bench-$(echo "$prefix" | tr . -).txt"
  if waited timeout "$tool_timeout" "$ecstore" bench --mode small --concurrency "$conc" --duration "$small_dur" "$@" "$url" >"$log" 2>&1; then
    :
  else
    say "ecstore bench $prefix failed:"
    tail -5 "$log" >&2
  fi
  for c in ${conc//,/ }; do
    for op in put get rm; do
      local v
      v="$(awk -v c="$c" -v op="$op" '$1 == "small" && $2 == c && $3 == op { print $5 " " $10 }' "$log")"
      if [ -z "$v" ]; then
        fail "$prefix.c$c.$op" "no result (see $(basename "$log")): $(tail -1 "$log")"
      elif [ "${v#* }" != 0 ]; then
        fail "$prefix.c$c.$op" "${v#* } errors: $(grep -m1 "$op (concurrency $c)" "$log" || true)"
      else
        record "$prefix.c$c.$op" "${v% *}"
      fi
    done
  done
  say "$prefix: $(awk '$1 == "small" { printf "c%s %s %s/s  ", $2, $3, $5 }' "$log")"
}

# random PREFIX URL: random reads of 30 KB in one object of the single
# transfers' size (ecstore bench --mode random, which writes it first):
# in vectors of 64 (kXR_readv, as ROOT's TTreeCache sends them) by one
# client, and single kXR_reads by 4 clients; records reads/s as
# PREFIX.readv and PREFIX.read
random() {
  local prefix="$1" url="$2" log key args v
  for key in readv read; do
    args=(--vector 64 --concurrency 1)
    [ "$key" = read ] && args=(--concurrency 4)
    log="$work/bench-$(echo "$prefix" | tr . -)-$key.txt"
    if ! waited timeout "$tool_timeout" "$ecstore" bench --mode random --size "$size" --objects 1 --read-size 30000 \
      --duration "$small_phase" "${args[@]}" "$url" >"$log" 2>&1; then
      say "ecstore bench $prefix.$key failed:"
      tail -5 "$log" >&2
    fi
    # reads/s: the MB/s column over the 30 KB of a read
    v="$(awk '$1 == "random" && $3 == "read" && $10 == 0 { printf "%.0f", $6 * 1e6 / 30000 }' "$log")"
    if [ -n "$v" ]; then
      record "$prefix.$key" "$v"
    else
      fail "$prefix.$key" "no result or errors (see $(basename "$log")): $(tail -1 "$log")"
    fi
  done
  say "$prefix: readv $(awk '$1 == "random" { print $6 " MB/s" }' "$work/bench-$(echo "$prefix" | tr . -)-readv.txt"), read $(awk '$1 == "random" { print $6 " MB/s" }' "$work/bench-$(echo "$prefix" | tr . -)-read.txt")"
}

# streams KEY URLBASE DIR EVICT...: reps rounds of 8 parallel xrdcp puts
# of the stream file to URLBASE//DIR/sI, then (cold: EVICT... dropped from
# the page cache) 8 parallel gets to /dev/null; records the median
# aggregate MB/s of each as KEY.put and KEY.get
streams() {
  local key="$1" url="$2" dir="$3" i j kind c0 put_ns=() get_ns=() put_nfail=0 get_nfail=0 put_err="" get_err="" rates put_acc=() get_acc=()
  shift 3
  for ((i = 0; i < reps; i++)); do
    if [ "$i" -gt 0 ]; then # each round creates its files, as the first
      for ((j = 0; j < nstreams; j++)); do
        remover "$url//$dir/s$j"
        remove_now >/dev/null 2>&1 || true
      done
    fi
    sync
    c0="$(cpu_sample)"
    if streams_once put "$url" "$dir"; then
      put_ns+=("$elapsed_ns")
      cpu_add put_acc "$c0" "$(cpu_sample)"
    else
      put_nfail=$((put_nfail + nfail)) put_err="${put_err:-$(xrd_error "$work"/stream-put*.log)}"
    fi
    "$limits" evict "$@" >/dev/null
    c0="$(cpu_sample)"
    if streams_once get "$url" "$dir"; then
      get_ns+=("$elapsed_ns")
      cpu_add get_acc "$c0" "$(cpu_sample)"
    else
      get_nfail=$((get_nfail + nfail)) get_err="${get_err:-$(xrd_error "$work"/stream-get*.log)}"
    fi
  done
  for kind in put get; do
    local got=() nf err
    if [ "$kind" = put ]; then got=("${put_ns[@]}") nf=$put_nfail err=$put_err; else got=("${get_ns[@]}") nf=$get_nfail err=$get_err; fi
    if [ "${#got[@]}" != "$reps" ]; then
      fail "$key.$kind" "$nf of $((reps * nstreams)) xrdcp ${kind}s failed: $err"
      continue
    fi
    elapsed_ns="$(median "${got[@]}")"
    record "$key.$kind" "$(mbps $((nstreams * stream)) "$elapsed_ns")"
    cpu_record "$key.$kind" $((reps * nstreams * stream)) "${kind}_acc"
    rates="$(for i in "${got[@]}"; do mbps $((nstreams * stream)) "$i"; echo; done | paste -sd/)"
    [ "$reps" -gt 1 ] && runs_note+="${runs_note:+; }$key.$kind $rates"
    say "$key.$kind = $(mbps $((nstreams * stream)) "$elapsed_ns") MB/s ($rates)"
  done
}

# streams_once put|get URLBASE DIR: 8 parallel xrdcp of one kind; sets
# elapsed_ns, or nfail and returns 1 when some failed
streams_once() {
  local kind="$1" url="$2" dir="$3" i t0 sp=()
  nfail=0
  t0=$(now)
  for ((i = 0; i < nstreams; i++)); do
    if [ "$kind" = put ]; then
      timeout "$tool_timeout" xrdcp --nopbar -f "$ssrc" "$url//$dir/s$i" >"$work/stream-put$i.log" 2>&1 &
    else
      timeout "$tool_timeout" xrdcp --nopbar -f "$url//$dir/s$i" /dev/null >"$work/stream-get$i.log" 2>&1 &
    fi
    sp+=($!)
    pids+=($!)
  done
  for i in "${!sp[@]}"; do
    local st=0
    wait "${sp[$i]}" || st=$?
    forget "${sp[$i]}"
    if [ "$st" != 0 ]; then
      nfail=$((nfail + 1))
      # xrdcp killed by a signal, or that printed nothing, leaves no
      # error line: say how it ended.
      printf 'xrdcp %s %s/%s/s%s: error: exit status %s\n' "$kind" "$url" "$dir" "$i" "$st" >>"$work/stream-$kind$i.log"
    fi
  done
  elapsed_ns=$(($(now) - t0))
  [ "$nfail" = 0 ]
}

# rss KEY PID: record the peak RSS (VmHWM) of a process in MiB
rss() {
  local kb
  kb="$(awk '/^VmHWM:/ { print $2 }' "/proc/$2/status" 2>/dev/null || true)"
  if [ -n "$kb" ]; then
    record "$1" "$(awk -v k="$kb" 'BEGIN { printf "%.1f", k / 1024 }')"
    say "$1 = $((kb / 1024)) MiB"
  else
    fail "$1" "no /proc/$2/status (the gateway exited?)"
  fi
}

# gateway NAME FLAGS...: start `ecstore serve` on a free port; sets gw_pid
# and gw_url
gateway() {
  local name="$1" addr
  shift
  start "$name" "$ecstore" serve --root-addr 127.0.0.1:0 --metrics-addr= --heal=false "$@"
  gw_pid=$started
  cpu_server=("$gw_pid")
  addr="$(wait_log "$gw_pid" "$name" 'serving root://[^ ]+')" || die "the gateway did not start"
  gw_url="root://${addr#serving root://}"
}

# --- 2. baseline: one plain xrootd --------------------------------------------
say "2. baseline: plain xrootd"
xdir="$work/xrootd"
mkdir -p "$xdir/data" "$xdir/admin"
xport="$("$limits" port)"
printf 'xrd.port %s\nall.export /\noss.localroot %s\nall.adminpath %s\nall.pidpath %s\nxrootd.chksum adler32\n' \
  "$xport" "$xdir/data" "$xdir/admin" "$xdir/admin" >"$xdir/xrootd.cf"
xargs_=(-c "$xdir/xrootd.cf" -l "$xdir/admin/xrootd.log")
if [ -n "$xrootd_user" ]; then
  chown "$xrootd_user:" "$xdir/data" "$xdir/admin"
  xargs_+=(-R "$xrootd_user")
fi
if [ -n "$xrootd_user" ] && command -v runuser >/dev/null 2>&1 &&
  ! runuser -u "$xrootd_user" -- test -w "$xdir/data"; then
  die "user $xrootd_user cannot reach $xdir: every parent of BENCH_DIR must be searchable by others (chmod o+x)"
fi
start xrootd xrootd "${xargs_[@]}"
xrootd_pid=$started
xurl="root://127.0.0.1:$xport"
xrootd_restarts=0
for ((i = 0; ; i++)); do
  if timeout 5 xrdfs "127.0.0.1:$xport" ls / >/dev/null 2>&1; then break; fi
  if ! kill -0 "$xrootd_pid" 2>/dev/null; then
    st=0
    wait "$xrootd_pid" || st=$?
    # Debian's xrootd 5.5.3 has died of SIGSEGV at start, before its
    # first log line: killed by a signal (status 128+N), it is started
    # again, twice at most.
    if [ "$st" -gt 128 ] && [ "$xrootd_restarts" -lt 2 ]; then
      xrootd_restarts=$((xrootd_restarts + 1))
      say "xrootd died of signal $((st - 128)) at start; starting it again"
      start xrootd xrootd "${xargs_[@]}"
      xrootd_pid=$started
      continue
    fi
    tail -20 "$work/xrootd.log" "$xdir"/admin/xrootd.log* >&2 || true
    die "xrootd exited at start (status $st)"
  fi
  [ "$i" -lt 300 ] || die "xrootd did not answer on port $xport within 30 s"
  sleep 0.1
done

cpu_server=("$xrootd_pid")
remover "$xurl//put-plain"
median_xrd xrootd.put "$size" remove_now -f "$src" "$xurl//put-plain" || true
rm -f "$xdir/data/put-plain"
sync
# durable like ecstore: the time includes an fsync of the file (sync FILE)
remover "$xurl//put-sync"
timed_median xrootd.put_fsync "$size" "$reps" remove_now xrd_sync "$xdir/data/put-sync" -f "$src" "$xurl//put-sync" || true
prime "$xurl//put-sync"
evicter "$xdir/data"
median_xrd xrootd.get "$size" evict_now -f "$xurl//put-sync" /dev/null || true
rm -f "$xdir/data/put-sync"
small xrootd.small.nofsync "$xurl//bench" 8
small xrootd.small.fsync "$xurl//bench" 1,8,64 --fsync
record info.note "Random reads (X16, X17 and the rows that follow them for ecstore): ecstore bench --mode random writes one object of $size_h and reads 30 KB at random offsets of it right away, so plain xrootd serves its file from the page cache, while ecstore's archives, written with O_DIRECT, are read from the disk; ecstore reads only the 4 KiB pages that hold each read, with their CRC-32Cs (docs/FORMAT.md, page checksums)."
random xrootd.random "$xurl//bench"
# The 8 parallel xrdcp of the stream rows, against this one plain xrootd:
# what those clients reach here from a server without erasure coding (its
# puts are not fsynced).
streams xrootd.streams "$xurl" streams "$xdir/data"
stop_proc "$xrootd_pid"
cpu_server=()
rm -rf "$xdir"

# --- 3. ecstore ---------------------------------------------------------------
geom=(--ec 8+2 --chunk-size 1MiB --spares 0)

# hwm PID: the peak RSS (VmHWM) of a process in MiB, or "?"
hwm() { awk '/^VmHWM:/ { printf "%d", $2 / 1024; found = 1 } END { if (!found) print "?" }' "/proc/$1/status" 2>/dev/null || echo "?"; }

# common KEYPREFIX EVICT...: the healthy tests on the running gateway
common() {
  local p="$1" h1 h2
  shift
  remover "$gw_url//big"
  median_xrd "$p.put" "$size" remove_now -f "$src" "$gw_url//big" || true
  prime "$gw_url//big"
  evicter "$@"
  median_xrd "$p.get" "$size" evict_now -f "$gw_url//big" /dev/null || true
  healthy_ns=$elapsed_ns
  h1="$(hwm "$gw_pid")"
  small "$p.small" "$gw_url//bench" 1,8,64
  h2="$(hwm "$gw_pid")"
  streams "$p.streams" "$gw_url" streams "$@"
  rss "$p.rss" "$gw_pid"
  random "$p.random" "$gw_url//bench"
  record info.note "gateway VmHWM ($p): ${h1} MiB after the $size_h put and get, ${h2} MiB after the small-object runs, then the figure of the RSS row after the streams."
}

say "3a. ecstore on 10 ecstore node processes"
# Each node stands for a server of its own: it gets one CPU's worth of Go
# scheduler (GOMAXPROCS=1), not the whole machine's, so that ten runtimes
# on two cores do not each spin and wake threads as if they had the cores
# to themselves. A node's work is system calls (sendfile, O_DIRECT
# writes, opens), which run outside the scheduler's limit anyway.
record info.note "The 10 ecstore nodes run with GOMAXPROCS=1 each (ten servers simulated on $(nproc) cores): with the default, every node's Go runtime spins and wakes threads for cores it shares with nine others; measured on 27 KB gets at concurrency 8, 1053-1430 ops/s with the default and 1681 with GOMAXPROCS=1, and 0.55 against 0.38 s of node CPU per 1 GiB get."
node_pids=()
node_urls=()
for i in 0 1 2 3 4 5 6 7 8 9; do
  d="$work/nodes/n$i"
  mkdir -p "$d/data"
  start "node$i" env GOMAXPROCS=1 "$ecstore" node --dir "$d" --addr 127.0.0.1:0
  node_pids+=("$started")
done
for i in 0 1 2 3 4 5 6 7 8 9; do
  a="$(wait_log "${node_pids[$i]}" "node$i" 'on root://[^ ]+')" || die "ecstore node $i did not start"
  node_urls+=("${a#on }//data")
done
cpu_nodes=("${node_pids[@]}")
gateway gw-nodes --nodes "$(
  IFS=,
  echo "${node_urls[*]}"
)" "${geom[@]}"
common nodes "$work/nodes"

# one node SIGSTOPped (not one of those killed next). The get is primed
# as N2's is: it comes after the 8-stream rows, and the first get after
# another kind of transfer pays for fresh heap (measured by hand: 1.14 s
# unprimed against 0.96-0.97 s primed with a node stopped), a cost that is
# not the stopped node's.
prime "$gw_url//big"
kill -STOP "${node_pids[2]}"
"$limits" evict "$work/nodes"
if timed_xrd nodes.get_stopped1 "$size" -f "$gw_url//big" /dev/null && [ "$healthy_ns" -gt 0 ]; then
  record nodes.stopped_stall "$(awk -v s="$elapsed_ns" -v h="$healthy_ns" 'BEGIN { printf "%.2f", (s - h) / 1e9 }')"
else
  fail nodes.stopped_stall "no healthy or stopped get to compare"
fi
kill -CONT "${node_pids[2]}"

# one node SIGSTOPped 0.2 s into a get, and into a put: its chunk reads
# and writes are left waiting in the middle of the transfer. The gateway
# avoids a node for 10 s (SuspectFor) after a call to it timed out, as
# the stopped get above and each of these make it do: without the pause,
# the next transfer would not ask the node at all rather than meet it
# hanging in its middle.
suspect_for=10 # the default of object.Options.SuspectFor, which serve does not change
record info.note "N6, N7 and N3 each start $((suspect_for + 1)) s after the row before them: the gateway avoids a node for $suspect_for s after a call to it timed out, so that without the pause N6 and N7 would meet a node already avoided instead of one that hangs in the middle of the transfer, and N3 would lose three nodes, not two."
sleep $((suspect_for + 1))
"$limits" evict "$work/nodes"
timed_xrd_hang nodes.get_hung1 "$size" "${node_pids[2]}" -f "$gw_url//big" /dev/null || true
sleep $((suspect_for + 1))
timed_xrd_hang nodes.put_hung1 "$size" "${node_pids[2]}" -f "$src" "$gw_url//big-hung" || true

# two nodes SIGKILLed (once the gateway has stopped avoiding node 2,
# which hung in the put above: the get is to lose two nodes, not three).
# N3 is compared with healthy gets timed right before the kill, not with
# N2's from minutes earlier: this disk's read rate drifts by a third
# within minutes (N2's runs 942-1255 MB/s, N3's 850-1082 in one run of
# session 21, with the same read path), which N3's ratio would carry.
sleep $((suspect_for + 1))
prime "$gw_url//big" # after a put, as N2's gets
evicter "$work/nodes"
median_xrd nodes.get_before_kill "$size" evict_now -f "$gw_url//big" /dev/null || true
stop_proc "${node_pids[0]}"
stop_proc "${node_pids[1]}"
evicter "$work/nodes"
median_xrd nodes.get_killed2 "$size" evict_now -f "$gw_url//big" /dev/null || true
stop_proc "$gw_pid"
for p in "${node_pids[@]:2}"; do stop_proc "$p"; done
rm -rf "$work/nodes"
cpu_nodes=()

say "3b. ecstore on 10 local directories (--data)"
data="$work/local"
gateway gw-local --data "$data" "${geom[@]}"
common local "$data"
stop_proc "$gw_pid"
# the same with page checksums offered, as plain xrootd does: xrdcp then
# sends kXR_pgwrite and kXR_pgread and computes a CRC32C per 4 KiB page
gateway gw-local-pg --data "$data" "${geom[@]}" --page-checksums
remover "$gw_url//big"
median_xrd local.put_pg "$size" remove_now -f "$src" "$gw_url//big" || true
prime "$gw_url//big"
evicter "$data"
median_xrd local.get_pg "$size" evict_now -f "$gw_url//big" /dev/null || true
stop_proc "$gw_pid"
# D3 against healthy gets timed right before it, as N3 (a gateway of
# its own, as D3's, since a gateway keeps its node directories open)
gateway gw-local2 --data "$data" "${geom[@]}"
prime "$gw_url//big"
evicter "$data"
median_xrd local.get_before_kill "$size" evict_now -f "$gw_url//big" /dev/null || true
stop_proc "$gw_pid"
mkdir -p "$work/moved"
mv "$data/nodes/00" "$data/nodes/01" "$work/moved/"
gateway gw-local3 --data "$data" "${geom[@]}"
prime "$gw_url//big" # a new gateway: time it in its steady state, as D2
evicter "$data"
median_xrd local.get_killed2 "$size" evict_now -f "$gw_url//big" /dev/null || true
stop_proc "$gw_pid"
rm -rf "$data" "$work/moved"

# one node directory on a file system that stops answering: a bindfs
# (FUSE) mount of a directory, whose server is SIGSTOPped before a cold
# get, freezes every system call on the mount in the kernel, as an NFS
# mount whose server is gone does. D-frozen is compared with healthy
# gets of the same setup (the FUSE directory included) right before.
say "3c. ecstore on 10 local directories, one of them on a FUSE mount that freezes"
fz="$work/fuse"
if ! command -v bindfs >/dev/null 2>&1 || [ ! -e /dev/fuse ]; then
  fail local.get_before_freeze "bindfs or /dev/fuse missing (scripts/install-deps.sh installs bindfs)"
  fail local.get_frozen1 "bindfs or /dev/fuse missing"
  fail local.frozen_stall "bindfs or /dev/fuse missing"
else
  fz_dirs=()
  for i in 0 1 2 3 4 5 6 7 8 9; do
    mkdir -p "$fz/n$i"
    fz_dirs+=("$fz/n$i")
  done
  mkdir -p "$fz/under3"
  start bindfs bindfs -f --no-allow-other "$fz/under3" "$fz/n3"
  bindfs_pid=$started
  mounts+=("$fz/n3")
  for ((i = 0; i < 500; i++)); do
    grep -q " $fz/n3 fuse" /proc/self/mounts && break
    sleep 0.01
  done
  gateway gw-fuse --nodes "$(
    IFS=,
    echo "${fz_dirs[*]}"
  )" "${geom[@]}"
  if xrd -f "$src" "$gw_url//big"; then
    prime "$gw_url//big"
    evicter "${fz_dirs[@]}" "$fz/under3"
    median_xrd local.get_before_freeze "$size" evict_now -f "$gw_url//big" /dev/null || true
    healthy_ns="$elapsed_ns"
    # evict what the frozen mount does not hold first: a walk into the
    # mount would freeze the walker too
    "$limits" evict "${fz_dirs[@]}" "$fz/under3" >/dev/null
    kill -STOP "$bindfs_pid"
    if timed_xrd local.get_frozen1 "$size" -f "$gw_url//big" /dev/null && [ "$healthy_ns" -gt 0 ]; then
      record local.frozen_stall "$(awk -v s="$elapsed_ns" -v h="$healthy_ns" 'BEGIN { printf "%.2f", (s - h) / 1e9 }')"
    else
      fail local.frozen_stall "no healthy or frozen get to compare"
    fi
    kill -CONT "$bindfs_pid"
  else
    fail local.get_before_freeze "put through the gateway failed: $(xrd_error "$work/xrdcp.log")"
    fail local.get_frozen1 "no object"
    fail local.frozen_stall "no object"
  fi
  stop_proc "$gw_pid"
  unmount "$fz/n3"
  stop_proc "$bindfs_pid"
  mounts=()
fi
rm -rf "$fz"

# --- report -------------------------------------------------------------------
if [ -n "${runs_note:-}" ]; then
  record info.note "Single transfers and the 8-stream rows are the median of $reps runs (a cold get's page cache dropped before each run); the MB/s of each run, in order: $runs_note."
fi
record info.load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
record info.elapsed "$(awk -v ns=$(($(now) - started_at)) 'BEGIN { printf "%.0f s", ns / 1e9 }')"
mkdir -p "$(dirname "$out")"
rc=0
"$work/bin/report" --in "$results" --out "$out" || rc=$?
cp "$results" "${out%.md}.tsv"
say "wrote $out and the raw measurements ${out%.md}.tsv (go run ./bench/report --in FILE.tsv --out FILE.md redoes the table)"
if [ "$failed" = 1 ] || [ "$rc" != 0 ]; then
  die "some measurements failed (ERR rows; logs in $work with BENCH_KEEP=1)"
fi
