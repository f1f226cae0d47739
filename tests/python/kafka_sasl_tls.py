"""confluent-kafka (librdkafka) or kafka-python logging in over SASL_SSL, then
producing three records and reading them back in a group, with a commit. Prints
one JSON object: the values read and the committed offset.

Usage: kafka_sasl_tls.py CLIENT BOOTSTRAP CA_FILE MECHANISM USER PASSWORD TOPIC GROUP
CLIENT is `confluent` or `kafka-python`. MECHANISM is a SCRAM one (USER is the key
id, PASSWORD its secret) or OAUTHBEARER (USER is ignored, PASSWORD is the token,
made by the caller).
"""

import json
import sys

TIMEOUT = 30.0
COUNT = 3


def confluent(bootstrap, ca, mechanism, user, password, topic, group):
    from confluent_kafka import TopicPartition
    from confluent_roundtrip import roundtrip

    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca, "sasl.mechanisms": mechanism}
    if mechanism == "OAUTHBEARER":
        # librdkafka asks for the token and its expiry (seconds since the epoch).
        conf["oauth_cb"] = lambda _config: (password, 4102444800.0)
    else:
        conf.update({"sasl.username": user, "sasl.password": password})
    c, values = roundtrip(conf, topic, [f"v{i}" for i in range(COUNT)], group)
    c.commit(offsets=[TopicPartition(topic, 0, COUNT)], asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)[0].offset
    c.close()
    return values, committed


def kafka_python(bootstrap, ca, mechanism, user, password, topic, group):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    conf = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
            "ssl_cafile": ca, "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Given(AbstractTokenProvider):
            def token(self):
                return password

        conf["sasl_oauth_token_provider"] = Given()
    else:
        conf.update({"sasl_plain_username": user, "sasl_plain_password": password})
    p = KafkaProducer(acks="all", **conf)
    for i in range(COUNT):
        p.send(topic, value=f"v{i}".encode(), partition=0).get(timeout=TIMEOUT)
    p.close(timeout=TIMEOUT)
    c = KafkaConsumer(group_id=group, enable_auto_commit=False,
                      consumer_timeout_ms=int(TIMEOUT * 1000), **conf)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    values = []
    for m in c:
        values.append(m.value.decode())
        if len(values) == COUNT:
            break
    c.commit({tp: OffsetAndMetadata(COUNT, "", -1)})
    committed = c.committed(tp)
    c.close()
    return values, committed


def main():
    client, *args = sys.argv[1:]
    run = {"confluent": confluent, "kafka-python": kafka_python}[client]
    values, committed = run(*args)
    print(json.dumps({"values": values, "committed": committed}), flush=True)


if __name__ == "__main__":
    main()
