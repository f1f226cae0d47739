#!/usr/bin/env bash
# Captures golden v2 batches: each real Kafka client sends records.tsv as one batch to
# its own topic on a fresh reference broker (kafka.sh), then extract.py takes every batch
# out of Kafka's segment files into broker/core/tests/golden/ with a manifest.
#
#   capture.sh [SCRATCH]   (default ~/.cache/es/golden-capture; wiped first)
#
# Needs java 17+, mvn, go, python3 with confluent-kafka (see README.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
scratch="${1:-$HOME/.cache/es/golden-capture}"
export KAFKA_PORT="${KAFKA_PORT:-19092}"
bootstrap="127.0.0.1:$KAFKA_PORT"
records="$here/records.tsv"

rm -rf "$scratch"
mkdir -p "$scratch"

echo "building the Java and Go clients"
mvn -q -B -f "$here/java/pom.xml" package dependency:copy-dependencies
(cd "$here/go" && go build -o "$scratch/franz-capture" .)

"$here/kafka.sh" start "$scratch/kafka"
trap '"$here/kafka.sh" stop "$scratch/kafka"' EXIT

java_send() { java -cp "$here/java/target/classes:$here/java/target/dependency/*" es.golden.Capture "$@"; }
franz_send() { "$scratch/franz-capture" "$@"; }
librdkafka_send() { python3 "$here/python/capture.py" librdkafka "$@"; }

# Topic names are CLIENT-CODEC[-idem]; extract.py reads client, codec and idempotence from
# them, and each client's version from the line it prints ("TOPIC: N records (VERSION)").
{
for codec in none gzip snappy lz4 zstd; do
    java_send "$bootstrap" "java-$codec" "$codec" false "$records"
    librdkafka_send "$bootstrap" "librdkafka-$codec" "$codec" false "$records"
    franz_send "$bootstrap" "franz-$codec" "$codec" false "$records"
done
java_send "$bootstrap" java-none-idem none true "$records"
librdkafka_send "$bootstrap" librdkafka-none-idem none true "$records"
franz_send "$bootstrap" franz-none-idem none true "$records"
} | tee "$scratch/sent.log"

# A clean stop flushes the segments before they are read.
"$here/kafka.sh" stop "$scratch/kafka"
trap - EXIT
python3 "$here/extract.py" "$scratch/kafka/data" "$records" "$scratch/sent.log" "$repo/broker/core/tests/golden"
