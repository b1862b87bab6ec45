#!/usr/bin/env bash
# The client's own ceiling. Not a test: prints a Markdown
# table of median requests/s over ROUNDS interleaved rounds (A B C ... A B C).
#
#   tests/client_benchmark.sh BUILD_DIR [ROUNDS=5]
#
# Needs: BUILD_DIR/client and BUILD_DIR/main4 (release build), the yardstick's
# programs (loadgen, nullsrv_epoll) in $YARDSTICK (default build/yardstick), redis-server and
# redis-benchmark. Everything listens on 127.0.0.1, on ports the kernel says
# are free, and is stopped at the end.
set -euo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR [ROUNDS]}" && pwd)
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
ys=$(cd "${YARDSTICK:-$here/../build/yardstick}" && pwd)
for p in loadgen nullsrv_epoll; do
  [ -x "$ys/$p" ] || { echo "client_benchmark: $ys/$p missing (build the yardstick there or set YARDSTICK=DIR)" >&2; exit 1; }
done
yard=$(mktemp -d)
cp "$ys/loadgen" "$ys/nullsrv_epoll" "$yard/"
cd "$yard"  # main4 writes its timing file into the working directory

PER_REQ=${PER_REQ:-60000}   # requests per run, one connection per request
KEEP=${KEEP:-300000}        # requests per run, keep-alive
THREADS=100

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$yard"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {  # wait until something accepts on 127.0.0.1:$1
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing listens on $1" >&2
  return 1
}

# Servers: main4 with no delay, the yardstick's epoll null server (closing and
# keep-alive flavours), Redis without persistence.
p_main4=$(free_port)
"$build/main4" 1000 127.0.0.1 "$p_main4" --delay-us 0 --no-twin >/dev/null 2>&1 &
pids+=($!)
p_null=$(free_port)
"$yard/nullsrv_epoll" -p "$p_null" >/dev/null 2>&1 &
pids+=($!)
p_nullk=$(free_port)
"$yard/nullsrv_epoll" -p "$p_nullk" -k >/dev/null 2>&1 &
pids+=($!)
p_redis=$(free_port)
redis-server --bind 127.0.0.1 --port "$p_redis" --save '' --appendonly no \
  --daemonize no --logfile /dev/null >/dev/null 2>&1 &
pids+=($!)
for p in "$p_main4" "$p_null" "$p_nullk" "$p_redis"; do wait_port "$p"; done

ours() {  # ours PORT MODE REQUESTS -> req/s
  "$build/client" 1000 127.0.0.1 "$1" --real-port --connection "$2" \
    --threads $THREADS --requests "$3" --quiet --format json |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["results"]; assert r["errors"]["total"]==0, r["errors"]; print(round(r["throughput_rps"]))'
}
loadgen() {  # loadgen PORT MODE REQUESTS -> req/s
  local k=""
  [ "$2" = keepalive ] && k="-k"
  "$yard/loadgen" -p "$1" -t $THREADS -n "$3" $k -T 60 -N 1000 |
    sed -n 's/.* err_connect=\([0-9]*\) err_io=\([0-9]*\) .* rps=\([0-9]*\) .*/\1 \2 \3/p' |
    awk '{ if ($1 + $2 > 0) { print "loadgen errors" > "/dev/stderr"; exit 1 } print $3 }'
}
redis() {  # redis MODE TEST -> req/s (100 clients, 100-byte values)
  local k=1
  [ "$1" = per-request ] && k=0
  redis-benchmark -h 127.0.0.1 -p "$p_redis" -c $THREADS -n "$( [ $k = 1 ] && echo "$KEEP" || echo "$PER_REQ")" \
    -d 100 -k $k -t "$2" --csv 2>/dev/null | awk -F'"' 'NR > 1 { print int($4) }'
}

declare -A results
measure() {  # measure LABEL COMMAND... ; appends one figure to results[LABEL]
  local label=$1
  shift
  local v
  v=$("$@")
  results[$label]+="$v "
  printf '  %-44s %s\n' "$label" "$v" >&2
}

labels=(
  "per-request|lockbench client -> main4 (delay 0)"
  "per-request|loadgen -> main4 (delay 0)"
  "per-request|lockbench client -> nullsrv_epoll"
  "per-request|loadgen -> nullsrv_epoll"
  "per-request|redis-benchmark -k 0 GET -> redis"
  "keepalive|lockbench client -> main4 (delay 0)"
  "keepalive|loadgen -k -> main4 (delay 0)"
  "keepalive|lockbench client -> nullsrv_epoll -k"
  "keepalive|loadgen -k -> nullsrv_epoll -k"
  "keepalive|redis-benchmark GET -> redis"
  "keepalive|redis-benchmark SET -> redis"
)
for r in $(seq "$rounds"); do
  echo "round $r of $rounds" >&2
  measure "${labels[0]}" ours "$p_main4" per-request "$PER_REQ"
  measure "${labels[1]}" loadgen "$p_main4" per-request "$PER_REQ"
  measure "${labels[2]}" ours "$p_null" per-request "$PER_REQ"
  measure "${labels[3]}" loadgen "$p_null" per-request "$PER_REQ"
  measure "${labels[4]}" redis per-request get
  measure "${labels[5]}" ours "$p_main4" keepalive "$KEEP"
  measure "${labels[6]}" loadgen "$p_main4" keepalive "$KEEP"
  measure "${labels[7]}" ours "$p_nullk" keepalive "$KEEP"
  measure "${labels[8]}" loadgen "$p_nullk" keepalive "$KEEP"
  measure "${labels[9]}" redis keepalive get
  measure "${labels[10]}" redis keepalive set
done

echo
echo "| mode | client -> server | median req/s | min | max |"
echo "|---|---|---:|---:|---:|"
for label in "${labels[@]}"; do
  # shellcheck disable=SC2086
  python3 - "$label" ${results[$label]} <<'EOF'
import statistics, sys
label, values = sys.argv[1], [int(v) for v in sys.argv[2:]]
mode, what = label.split("|")
print(f"| {mode} | {what} | {statistics.median(values):,.0f} | {min(values):,} | {max(values):,} |")
EOF
done
echo
echo "$rounds interleaved rounds, $THREADS client threads/connections, per-request runs of $PER_REQ requests, keep-alive runs of $KEEP requests; $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)."
