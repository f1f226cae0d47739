#!/bin/bash
# HTTP consume, two es-broker builds alternated (issue 12).
# Usage: benches/http_consume_ab.sh OLD_BROKER NEW_BROKER [ROUNDS] [SECONDS]
# Each build gets its own data directory (data formats may differ between builds),
# filled by that build with the same 20,000 records of 256 B in one partition. Then
# per round and build: start the broker, GET 10,000 records per request with curl
# for SECONDS, stop it.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} secs=${4:-6}
dir=$(mktemp -d) port=19000
value=$(head -c 192 /dev/urandom | base64 -w0)
python3 -c "import json,sys; print(json.dumps({'records':[{'key':'k%d'%i,'value':sys.argv[1]} for i in range(500)]}))" \
  "$value" > "$dir/body.json"
start() { # build, data directory
  local kafka=()  # builds before the Kafka listener have no --bind-kafka
  if "$1" --help | grep -q -- --bind-kafka; then kafka=(--bind-kafka 127.0.0.1:19092); fi
  "$1" --data-dir "$2" --bind 127.0.0.1:$port --bind-binary 127.0.0.1:19001 "${kafka[@]}" \
    > "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf localhost:$port/healthz > /dev/null && return; sleep 0.1; done
  echo "$1 did not start; see $dir/broker.log" >&2; exit 1
}
builds=("$old" "$new")
for i in 0 1; do
  start "${builds[$i]}" "$dir/data$i"
  curl -sf -XPOST localhost:$port/topics -H 'content-type: application/json' \
    -d '{"name":"c","partitions":1}' > /dev/null
  for _ in $(seq 40); do
    curl -sf -XPOST localhost:$port/topics/c/records -H 'content-type: application/json' \
      -d @"$dir/body.json" > /dev/null
  done
  kill $pid; wait $pid || true
done
for round in $(seq "$rounds"); do
  for i in 0 1; do
    start "${builds[$i]}" "$dir/data$i"
    end=$((SECONDS + secs)) n=0
    while [ $SECONDS -lt $end ]; do
      curl -sf -o /dev/null "localhost:$port/topics/c/partitions/0/records?offset=0&max_records=10000&max_bytes=8388608"
      n=$((n + 1))
    done
    echo "round $round ${builds[$i]}: $((n * 10000 / secs)) records/s"
    kill $pid; wait $pid || true
  done
done
rm -rf "$dir"
