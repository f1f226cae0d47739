"""confluent-kafka (librdkafka) with SASL against a Kafka listener. Prints one JSON
object per line: what the client observed.

Usage: kafka_sasl.py BOOTSTRAP MECHANISM USER PASSWORD SCENARIO TOPIC [GROUP]
Scenarios:
  roundtrip TOPIC GROUP  produce three records (idempotent), consume them in GROUP, commit
  login TOPIC            one metadata request; reports the error the login ended with
  produce TOPIC          produce one record; reports the delivery error, if any
  reauth TOPIC           produce a record every 0.25 s for 6 s on one connection (the
                         broker's session lifetime is shorter: librdkafka re-authenticates)
  rate TOPIC SECONDS SIZE GAP
                         produce SIZE-byte records for SECONDS, one every GAP s (0: as
                         fast as the client goes); reports bytes delivered, errors and
                         the longest delivery latency
"""

import json
import re
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TIMEOUT = 30.0


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def config(bootstrap, mechanism, user, password, **extra):
    c = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    c.update(extra)
    return c


def roundtrip(conf, topic, group):
    p = Producer(dict(conf, **{"enable.idempotence": True, "linger.ms": 5}))
    reports = []
    for i in range(3):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i,
                  on_delivery=lambda err, msg: reports.append(None if err is None else err.name()))
    left = p.flush(TIMEOUT)
    c = Consumer(dict(conf, **{"group.id": group, "auto.offset.reset": "earliest",
                               "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    values = []
    for _ in range(200):
        if len(values) == 3:
            break
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            values.append(m.value().decode())
    committed = None
    if values:
        c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)[0].offset
    c.close()
    emit(scenario="roundtrip", left=left, reports=reports, values=values, committed=committed)


def normalize(text):
    """An error text without the timings librdkafka adds."""
    return re.sub(r"\(after \d+ms[^)]*\)", "", text).strip()


def login(conf, topic):
    errors = []
    # One attempt only: retries would run into the broker's auth-failure throttle.
    p = Producer(dict(conf, **{"error_cb": lambda e: errors.append((e.name(), normalize(e.str()))),
                               "reconnect.backoff.ms": 10000, "reconnect.backoff.max.ms": 10000}))
    error = None
    try:
        p.list_topics(topic=topic, timeout=5)
    except KafkaException as e:
        error = e.args[0].name()
    p.poll(1.0)  # serves the error callbacks
    auth = [e for e in errors if e[0] == "_AUTHENTICATION"]
    emit(scenario="login", error=error, auth=auth[:1])


def produce(conf, topic):
    reports = []
    p = Producer(dict(conf, **{"message.timeout.ms": 10000}))
    p.produce(topic, value=b"probe", on_delivery=lambda err, msg: reports.append(None if err is None else err.name()))
    left = p.flush(TIMEOUT)
    emit(scenario="produce", left=left, reports=reports)


def reauth(conf, topic):
    errors = []
    p = Producer(dict(conf, **{"error_cb": lambda e: errors.append(e.name()), "linger.ms": 0}))
    reports = []
    for i in range(24):
        p.produce(topic, value=b"r%d" % i,
                  on_delivery=lambda err, msg: reports.append(None if err is None else err.name()))
        p.flush(TIMEOUT)
        time.sleep(0.25)
    emit(scenario="reauth", reports=reports, errors=errors)


def rate(conf, topic, seconds, size, gap):
    stats = {"bytes": 0, "delivered": 0, "errors": [], "latency_max": 0.0}

    def report(sent):
        def done(err, msg):
            if err is not None:
                stats["errors"].append(err.name())
                return
            stats["bytes"] += size
            stats["delivered"] += 1
            stats["latency_max"] = max(stats["latency_max"], time.monotonic() - sent)
        return done

    # Small batches, so one request's after-the-fact charge stays small.
    p = Producer(dict(conf, **{"linger.ms": 5, "batch.size": 16384, "acks": 1,
                               "queue.buffering.max.messages": 16}))
    value = b"x" * size
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, value=value, on_delivery=report(time.monotonic()))
        except BufferError:
            p.poll(0.01)
            continue
        p.poll(gap if gap > 0 else 0)
    left = p.flush(TIMEOUT)
    emit(scenario="rate", left=left, elapsed=time.monotonic() - start, **stats)


def main():
    bootstrap, mechanism, user, password, scenario, topic = sys.argv[1:7]
    conf = config(bootstrap, mechanism, user, password)
    if scenario == "roundtrip":
        roundtrip(conf, topic, sys.argv[7])
    elif scenario == "login":
        login(conf, topic)
    elif scenario == "produce":
        produce(conf, topic)
    elif scenario == "reauth":
        reauth(conf, topic)
    elif scenario == "rate":
        rate(conf, topic, float(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9]))
    else:
        raise SystemExit("unknown scenario " + scenario)


if __name__ == "__main__":
    main()
