#!/bin/bash
# HTTP consume, two es-broker builds alternated on one data directory (issue 12).
# Usage: benches/http_consume_ab.sh OLD_BROKER NEW_BROKER [ROUNDS] [SECONDS]
# Fills a 1-partition topic with 20,000 records of 256 B, then per round and build
# starts the broker, GETs 10,000 records per request with curl for SECONDS, stops it.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} secs=${4:-6}
dir=$(mktemp -d) port=19000
start() {
  "$1" --data-dir "$dir/data" --bind 127.0.0.1:$port --bind-binary 127.0.0.1:19001 \
    --bind-kafka 127.0.0.1:19092 > "$dir/broker.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf localhost:$port/healthz > /dev/null && return; sleep 0.1; done
  echo "the broker did not start; see $dir/broker.log" >&2; exit 1
}
start "$old"
curl -sf -XPOST localhost:$port/topics -H 'content-type: application/json' -d '{"name":"c","partitions":1}' > /dev/null
value=$(head -c 192 /dev/urandom | base64 -w0)
python3 -c "import json,sys; print(json.dumps({'records':[{'key':'k%d'%i,'value':sys.argv[1]} for i in range(500)]}))" "$value" > "$dir/body.json"
for _ in $(seq 40); do
  curl -sf -XPOST localhost:$port/topics/c/records -H 'content-type: application/json' -d @"$dir/body.json" > /dev/null
done
kill $pid; wait $pid || true
for round in $(seq "$rounds"); do
  for b in "$old" "$new"; do
    start "$b"
    end=$((SECONDS + secs)) n=0
    while [ $SECONDS -lt $end ]; do
      curl -sf -o /dev/null "localhost:$port/topics/c/partitions/0/records?offset=0&max_records=10000&max_bytes=8388608"
      n=$((n + 1))
    done
    echo "round $round $b: $((n * 10000 / secs)) records/s"
    kill $pid; wait $pid || true
  done
done
rm -rf "$dir"
