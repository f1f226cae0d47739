#!/usr/bin/env bash
# A reference Apache Kafka broker (KRaft, one node acting as broker and controller) run
# straight from Maven Central's jars with `java -cp`: the golden-batch capture uses it,
# and so can differential tests. Plaintext on 127.0.0.1 only.
#
#   kafka.sh start DIR   format DIR (once) and start a broker whose data and logs live in DIR
#   kafka.sh stop DIR    stop the broker started in DIR (by its recorded pid)
#
# Environment: KAFKA_PORT (default 19092; the controller listens on KAFKA_PORT+1),
# KAFKA_LIBS (where the jars go, default ~/.cache/es/kafka-<version>-libs), KAFKA_VERSION
# (default 4.1.1, as pinned in broker/pom.xml). Needs java 17+ and mvn.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${KAFKA_VERSION:-4.1.1}"
libs="${KAFKA_LIBS:-$HOME/.cache/es/kafka-$version-libs}"
port="${KAFKA_PORT:-19092}"
controller_port=$((port + 1))

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd="$1"
mkdir -p "$2"
dir="$(cd "$2" && pwd)"

fetch_jars() {
    # Maven resolves kafka_2.13 and its runtime dependencies once; later starts reuse them.
    if [ ! -f "$libs/kafka_2.13-$version.jar" ]; then
        mvn -q -B -f "$here/broker/pom.xml" -Dkafka.version="$version" \
            dependency:copy-dependencies -DoutputDirectory="$libs"
    fi
}

write_config() {
    cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Stored as the producer sent it: the log keeps a client's batch from attributes on.
compression.type=producer
log.message.timestamp.type=CreateTime
PROPS
    cat > "$dir/log4j2.properties" <<PROPS
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
PROPS
}

java_run() {
    # exec: when backgrounded, the recorded pid is the JVM's own, not a subshell's.
    exec java -Xmx512m -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$libs/*" "$@"
}

wait_listening() {
    # Bounded: 90 s for the JVM to start and the KRaft quorum of one to elect itself.
    local pid="$1"
    for _ in $(seq 1 180); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "kafka exited during start; see $dir/server.log and $dir/stdout.log" >&2
            return 1
        fi
        if grep -q 'Kafka Server started' "$dir/server.log" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    echo "kafka did not start within 90 s; see $dir/server.log" >&2
    return 1
}

start() {
    fetch_jars
    if [ -f "$dir/kafka.pid" ] && kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
        echo "already running (pid $(cat "$dir/kafka.pid"))" >&2
        return 1
    fi
    write_config
    if [ ! -f "$dir/data/meta.properties" ]; then
        # A static quorum (controller.quorum.voters), so no --standalone.
        (java_run kafka.tools.StorageTool format -t "$(java_run kafka.tools.StorageTool random-uuid)" \
            -c "$dir/server.properties" > "$dir/format.log" 2>&1) \
            || { echo "formatting failed; see $dir/format.log" >&2; return 1; }
    fi
    # A fresh log, so the readiness check cannot see a previous run's line.
    : > "$dir/server.log"
    (java_run kafka.Kafka "$dir/server.properties") > "$dir/stdout.log" 2>&1 &
    echo $! > "$dir/kafka.pid"
    wait_listening "$(cat "$dir/kafka.pid")"
    echo "kafka $version on 127.0.0.1:$port (pid $(cat "$dir/kafka.pid"), data in $dir/data)"
}

stop() {
    [ -f "$dir/kafka.pid" ] || { echo "no kafka.pid in $dir" >&2; return 1; }
    local pid
    pid="$(cat "$dir/kafka.pid")"
    kill "$pid" 2>/dev/null || true
    # Bounded wait for a clean shutdown (it flushes segments), then force.
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$dir/kafka.pid"; return 0; }
        sleep 0.5
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/kafka.pid"
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
