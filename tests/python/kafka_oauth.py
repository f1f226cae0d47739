"""confluent-kafka (librdkafka) with SASL OAUTHBEARER against a Kafka listener,
its token an HS256 JWT made here by an `oauth_cb`. Prints one JSON object per
line: what the client observed.

Usage: kafka_oauth.py BOOTSTRAP HS256_KEY SUBJECT TOKEN_KIND SCENARIO TOPIC [GROUP]
Token kinds: good, expired (exp an hour ago), badsig (signed with another key),
notyet (nbf an hour ahead).
Scenarios:
  roundtrip TOPIC GROUP  produce three records, consume them in GROUP, commit
  login TOPIC            one metadata request; reports the error the login ended with
"""

import base64
import hashlib
import hmac
import json
import re
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TIMEOUT = 30.0


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(key, claims):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signed = f"{header}.{payload}"
    sig = hmac.new(key.encode(), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{b64url(sig)}"


def token_cb(key, subject, kind):
    def cb(_config):
        now = int(time.time())
        claims = {"sub": subject, "exp": now + 3600}
        signing_key = key
        if kind == "expired":
            claims["exp"] = now - 3600
        elif kind == "notyet":
            claims["nbf"] = now + 3600
        elif kind == "badsig":
            signing_key = key + "-but-another-one"
        # librdkafka wants the lifetime in seconds; report a future one even for
        # an expired token, so the client sends it instead of refusing locally.
        return jwt(signing_key, claims), float(now + 3600)

    return cb


def config(bootstrap, key, subject, kind):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": token_cb(key, subject, kind),
    }


def roundtrip(conf, topic, group):
    p = Producer(dict(conf, **{"linger.ms": 5}))
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


def main():
    bootstrap, key, subject, kind, scenario, topic = sys.argv[1:7]
    conf = config(bootstrap, key, subject, kind)
    if scenario == "roundtrip":
        roundtrip(conf, topic, sys.argv[7])
    elif scenario == "login":
        login(conf, topic)
    else:
        raise SystemExit("unknown scenario " + scenario)


if __name__ == "__main__":
    main()
