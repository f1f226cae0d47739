#!/usr/bin/env bash
# The cost of metrics on the broker's hot paths (issue 18): `es-bench suite`
# against a broker started with --metrics=true and with --metrics=false,
# alternated, ROUNDS rounds, then each row's median records/s per mode and the
# difference. Usage: benches/metrics_cost.sh [BIN_DIR] (default target/release).
set -euo pipefail
BIN=${1:-target/release}
ROUNDS=${ROUNDS:-3}
ROW_SECONDS=${ROW_SECONDS:-5}
WORK=$(mktemp -d)
PID=""
# A failed row must not leave its broker running.
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT

start_broker() { # run mode -> sets PID, BINARY, HTTP
  # A file per start: the previous broker's addresses must never be read.
  local data=$WORK/data-$1 addr=$WORK/addr-$1
  "$BIN/es-broker" --data-dir "$data" --bind 127.0.0.1:0 --bind-binary 127.0.0.1:0 \
    --bind-kafka 127.0.0.1:0 --metrics="$2" >"$addr" 2>"$WORK/err-$1" &
  PID=$!
  for _ in $(seq 1 300); do # bounded: 30 s
    grep -q 'http://' "$addr" 2>/dev/null && break
    sleep 0.1
  done
  BINARY=$(grep -o 'es://[^ ]*' "$addr" | sed 's#es://##')
  HTTP=$(grep -o 'http://[^ ]*' "$addr")
}

for round in $(seq 1 "$ROUNDS"); do
  # The order flips every round (on, off; off, on; ...): whichever broker runs
  # second inherits the first one's disk writeback, which a fixed order would
  # charge to one mode only.
  modes="true false"
  [ $((round % 2)) = 0 ] && modes="false true"
  for mode in $modes; do
    start_broker "$round-$mode" "$mode"
    echo "round $round, --metrics=$mode: broker $BINARY $HTTP" >&2
    "$BIN/es-bench" suite --seconds "$ROW_SECONDS" --binary-addr "$BINARY" --http-url "$HTTP" \
      --dir "$WORK/bench-$round-$mode" --out "$WORK/out-$round-$mode" >"$WORK/log-$round-$mode" 2>&1 ||
      { echo "es-bench suite failed (round $round, --metrics=$mode):" >&2; grep -v "^ *[0-9]*: \|^ *at " "$WORK/log-$round-$mode" | tail -15 >&2; exit 1; }
    kill -TERM "$PID"
    wait "$PID" || true
    PID=""
    # Each round writes gigabytes: keep only its results.
    rm -rf "$WORK/data-$round-$mode" "$WORK/bench-$round-$mode"
  done
done

python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = {m: [json.load(open(f"{work}/out-{r}-{m}/suite.json")) for r in range(1, rounds + 1)]
        for m in ("true", "false")}
labels = [row["label"] for row in runs["true"][0]["rows"]]
print(f"| row | metrics on (median rec/s) | metrics off (median rec/s) | on vs off | rounds on | rounds off |")
print("| --- | ---: | ---: | ---: | --- | --- |")
for label in labels:
    per = {m: [next(r["records_per_s"] for r in run["rows"] if r["label"] == label) for run in runs[m]]
           for m in runs}
    on, off = statistics.median(per["true"]), statistics.median(per["false"])
    diff = (on / off - 1) * 100 if off else float("nan")
    fmt = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)
    print(f"| {label} | {on:,.0f} | {off:,.0f} | {diff:+.1f}% | {fmt(per['true'])} | {fmt(per['false'])} |")
PY
