"""The Python rows and kcat of the Kafka client matrix: confluent-kafka (librdkafka),
kafka-python and kcat through the scenarios the Java client, franz-go and the rdkafka
crate run (tests/kafka-clients/). Each run prints one flat JSON object, on its last
line, of what the client observed, so tests/tests/kafka_reference_python.rs can
compare it field by field with what the same run observed on Apache Kafka 4.4.0
(tests/kafka-clients/observed/kafka-4.4.0-{confluent,kafka-python,kcat}-*.json).

Usage:
  kafka_scenarios.py --client confluent|kafka-python|kcat roundtrip BOOTSTRAP PREFIX CODEC
  kafka_scenarios.py --client confluent|kafka-python|kcat group BOOTSTRAP PREFIX

roundtrip uses the topic PREFIX-CODEC, group the topic PREFIX-group. Each client keeps
its producer defaults: confluent-kafka with enable.idempotence=true and acks=all (as
the other confluent-kafka tests set them; librdkafka's consistent_random
partitioner), kafka-python 3 with its default idempotent producer (acks=all; the
murmur2 partitioner, as Java's), kcat with librdkafka's. The client-side request
limit is raised above the oversized record only, so that the broker, not the client,
refuses it.

kafka-python accepts only bytes header values, so its first record carries an empty
value for header "b" where the others send a null one.

Every wait is bounded: a client call that fails exits non-zero with the reason, a
wait that runs out shows in the observation (and so differs from Apache Kafka's).
"""

import argparse
import base64
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

FIXED_TS = 1_700_000_000_000
LIMIT = 60.0
T = 30.0
# The group scenario's records: 10 in each of 6 partitions.
GROUP_RECORDS = 60


def png():
    """A PNG signature followed by a fixed pattern, as the Java scenario builds it."""
    data = bytearray(300)
    data[:8] = b"\x89PNG\r\n\x1a\n"
    for i in range(8, 300):
        data[i] = (i * 31 + 7) & 0xFF
    return bytes(data)


def records(null_header):
    """(key, value, headers, timestamp) of the round trip, all to partition 0 so their
    order is fixed: binary key, duplicate header keys and a null header value, null vs
    empty values, invalid UTF-8, a PNG, two explicit timestamps."""
    return [
        (b"\x00\n\xff", b"hello", [("a", b"1"), ("a", b"2"), ("b", None if null_header else b"")], None),
        (None, b"", [], None),
        (b"tombstone", None, [], None),
        (b"utf8", b"\xc3\x28\xa0", [], FIXED_TS),
        (b"png", png(), [], FIXED_TS + 5),
    ]


def oversized_value():
    """Incompressible, so every codec leaves it over the brokers' 1 MiB limit."""
    return random.Random(42).randbytes(1_100_000)


def b64(v):
    return "null" if v is None else "'" + base64.b64encode(v).decode() + "'"


def line(key, value, headers, ts):
    """One record as the other scenario programs print it: key/value/headers, and the
    timestamp when it is one the scenario set."""
    s = f"{b64(key)}/{b64(value)}/" + "".join(f"{k}={b64(v)};" for k, v in headers)
    if ts is not None and FIXED_TS <= ts < FIXED_TS + 1000:
        s += f"/ts={ts}"
    return s


def compare(out, got, sent):
    """byte_identical over the fixed records (partition 0 also holds the keyed records
    that hashed there), with both sides printed when they differ."""
    seen = [line(*r) for r in got[: len(sent)]]
    expected = [line(*r) for r in sent]
    out["consumed"] = len(got)
    out["byte_identical"] = seen == expected
    if seen != expected:
        out["seen"] = " | ".join(seen)
        out["expected"] = " | ".join(expected)


def described(node, address, bootstrap, internal, has_id, partitions, topic_ops, nodes, rack, controller,
              cluster_ops):
    """A topic and the cluster as described, the one node named NODE: its id is each
    broker's own configuration (node.id=1 in the capture, 0 for an es single node).
    Left out: the partitions' leader epochs (a new Kafka partition starts at 0, an es
    single node leads in epoch 1; docs/kafka.md, Differences) and the cluster id
    (random on Kafka)."""

    def named(i):
        return "NODE" if i == node else str(i)

    return {
        "topic_internal": internal,
        "topic_has_id": has_id,
        "topic_partitions": "|".join(
            f"{p}:leader={named(leader)},replicas={'+'.join(map(named, replicas))},isr={'+'.join(map(named, isr))}"
            for p, leader, replicas, isr in sorted(partitions)),
        "topic_operations": ",".join(sorted(topic_ops)),
        "cluster_nodes": nodes,
        "cluster_node_is_bootstrap": address == bootstrap,
        "cluster_node_rack": str(rack),
        "cluster_controller": named(controller),
        "cluster_operations": ",".join(sorted(cluster_ops)),
    }


def bounded(what, check, limit=LIMIT):
    """Waits for `check()` to be truthy, bounded; its last value."""
    deadline = time.time() + limit
    value = check()
    while not value and time.time() < deadline:
        time.sleep(0.1)
        value = check()
    if not value:
        print(f"waited {limit} s for {what}", flush=True)
    return value


def split_group(members):
    """Starts the group members, (name, callable taking the name and the shared state)
    pairs, each in a thread; the state and the threads. A member's exception is kept
    in the state and shows as the observation's member_errors."""
    state = {
        "lock": threading.Lock(), "seen": set(), "duplicates": 0, "assigned": {}, "joined": threading.Event(),
        "errors": [],
    }

    def run(name, member):
        try:
            member(name, state)
        except Exception as e:  # noqa: BLE001 - reported in the observation's error
            state["errors"].append(f"{name}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(n, m), daemon=True) for n, m in members]
    for t in threads:
        t.start()
    return state, threads


def note_assignment(state, name, partitions):
    """The member's assignment from the rebalance callbacks, until both hold a share:
    then the split is fixed (a member leaving at the end rebalances the other onto
    every partition, which is not the split)."""
    with state["lock"]:
        if not state["joined"].is_set():
            if partitions:
                state["assigned"][name] = set(partitions)
            else:
                state["assigned"].pop(name, None)
            if len(state["assigned"]) == 2:
                state["joined"].set()


def note_record(state, value):
    """A record a member read; one read twice counts as a duplicate."""
    with state["lock"]:
        if value in state["seen"]:
            state["duplicates"] += 1
        state["seen"].add(value)


def all_read(state):
    with state["lock"]:
        return len(state["seen"]) >= GROUP_RECORDS


def summarise(out, state):
    """What the members read and how they split the partitions."""
    out["records_read"] = len(state["seen"])
    out["duplicates"] = state["duplicates"]
    sets = list(state["assigned"].values())
    out["assignment_shape"] = str(sorted(len(s) for s in sets))
    out["assignment_overlap"] = len(set().union(*sets)) < sum(len(s) for s in sets)
    if state["errors"]:
        out["member_errors"] = "; ".join(state["errors"])


# ---- confluent-kafka ----------------------------------------------------------------


class Confluent:
    def __init__(self, bootstrap):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient(self.conf())

    def conf(self, **extra):
        c = {"bootstrap.servers": self.bootstrap, "broker.address.family": "v4", "log_level": 3}
        c.update(extra)
        return c

    def producer(self, **extra):
        from confluent_kafka import Producer

        return Producer(self.conf(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                     "message.timeout.ms": 30000}, **extra))

    def create(self, topic, n):
        from confluent_kafka.admin import NewTopic

        for f in self.admin.create_topics([NewTopic(topic, n, 1)], operation_timeout=T).values():
            f.result(timeout=T)
        return self.wait_partitions(topic, n)

    def partitions(self, topic):
        t = self.admin.list_topics(topic=topic, timeout=T).topics.get(topic)
        return 0 if t is None or t.error is not None else len(t.partitions)

    def wait_partitions(self, topic, n):
        bounded(f"{n} partitions of {topic}", lambda: self.partitions(topic) == n)
        return self.partitions(topic)

    def listed(self, topic):
        return topic in self.admin.list_topics(timeout=T).topics

    def delete(self, topic):
        for f in self.admin.delete_topics([topic], operation_timeout=T).values():
            f.result(timeout=T)
        return bool(bounded(f"{topic} to leave the metadata", lambda: not self.listed(topic)))

    def described(self, topic):
        """DescribeTopics and DescribeCluster with authorized operations, the node
        named (see `described`)."""
        from confluent_kafka import TopicCollection

        [f] = self.admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
        t = f.result(timeout=T)
        c = self.admin.describe_cluster(include_authorized_operations=True, request_timeout=T).result(timeout=T)
        [node] = c.nodes
        return described(
            node.id, f"{node.host}:{node.port}", self.bootstrap, t.is_internal,
            t.topic_id is not None and (t.topic_id.get_most_significant_bits(), t.topic_id.get_least_significant_bits())
            != (0, 0),
            [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr]) for p in t.partitions],
            [op.name for op in t.authorized_operations or []], len(c.nodes), node.rack, c.controller.id,
            [op.name for op in c.authorized_operations or []])

    def send_all(self, p, items):
        """Produces (partition, key, value, headers, ts) items; each one's (error name or
        None, partition, offset), in the order sent."""
        reports = [None] * len(items)

        def report(i):
            return lambda err, msg: reports.__setitem__(i, (err.name() if err else None, msg.partition(),
                                                            msg.offset()))

        for i, (partition, key, value, headers, ts) in enumerate(items):
            kw = {"key": key, "value": value, "on_delivery": report(i)}
            if partition is not None:
                kw["partition"] = partition
            if headers:
                kw["headers"] = headers
            if ts is not None:
                kw["timestamp"] = ts
            p.produce(topic=self.topic, **kw)
        left = p.flush(T)
        if left:
            raise SystemExit(f"{left} records not delivered within {T} s")
        return reports

    def roundtrip(self, topic, codec):
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.admin import NewPartitions

        self.topic = topic
        out = {"partitions_created": self.create(topic, 3)}
        for f in self.admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=T).values():
            f.result(timeout=T)
        out["partitions_after_increase"] = self.wait_partitions(topic, 4)
        out["listed"] = self.listed(topic)
        out.update(self.described(topic))

        sent = records(null_header=True)
        p = self.producer(**{"compression.type": codec, "message.max.bytes": 4_000_000})
        placed = self.send_all(p, [(0, k, v, h, ts) for k, v, h, ts in sent])
        out["placed"] = ",".join(f"{part}@{off}" for _, part, off in placed)
        [(error, _, _)] = self.send_all(p, [(1, None, oversized_value(), None, None)])
        out["oversized_error"] = error or "accepted"
        del p

        keyed = self.send_all(self.producer(), [(None, f"key-{i}".encode(), f"key-{i}".encode(), None, None)
                                                for i in range(12)])
        out["keyed_partitions"] = ",".join(str(part) for _, part, _ in keyed)

        c = Consumer(self.conf(**{"group.id": "confluent-" + topic, "enable.auto.commit": False}))
        p0 = TopicPartition(topic, 0)
        low, high = c.get_watermark_offsets(p0, timeout=T)
        c.assign([TopicPartition(topic, 0, 0)])
        got, first = [], None
        deadline = time.time() + LIMIT
        while (not got or got[-1][4] < high - 1) and time.time() < deadline:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                raise SystemExit(f"consume: {m.error()}")
            kind, ts = m.timestamp()
            if first is None:
                first = (TIMESTAMP_TYPES.get(kind, str(kind)), m.offset())
            got.append((m.key(), m.value(), m.headers() or [], ts, m.offset()))
        # Records' leader epochs are left out: a new Kafka partition starts at 0, an
        # es single node leads in epoch 1 (docs/kafka.md, Differences).
        compare(out, [g[:4] for g in got], sent)
        if first:
            out["timestamp_type"], out["first_offset"] = first
        out["beginning_offset"], out["end_offset"] = low, high
        [at] = c.offsets_for_times([TopicPartition(topic, 0, FIXED_TS)], timeout=T)
        out["offset_for_fixed_timestamp"] = at.offset
        # No record is that late: librdkafka reports the end (-1, OFFSET_END).
        [future] = c.offsets_for_times([TopicPartition(topic, 0, 2**62)], timeout=T)
        out["offset_for_future_timestamp"] = future.offset
        c.close()
        out["deleted"] = self.delete(topic)
        return out

    def describe_active(self, group_id):
        """The group described while both members hold their share (Stable)."""
        [f] = self.admin.describe_consumer_groups([group_id], request_timeout=T,
                                                  include_authorized_operations=True).values()
        g = f.result(timeout=T)
        return {
            "active_state": g.state.name,
            "active_type": g.type.name,
            "active_assignor": g.partition_assignor,
            "active_members": len(g.members),
            "active_member_shares": str(sorted(len(m.assignment.topic_partitions) for m in g.members)),
            "active_client_ids": ",".join(sorted(m.client_id for m in g.members)),
            # Kafka names a member "<client id>-<uuid>" and its host "/<address>".
            "active_member_ids_named_by_client": all(m.member_id.startswith(m.client_id + "-") for m in g.members),
            "active_client_hosts": ",".join(sorted({m.host for m in g.members})),
            "group_operations": ",".join(sorted(op.name for op in g.authorized_operations or [])),
        }

    def group(self, topic):
        from confluent_kafka import Consumer, ConsumerGroupTopicPartitions

        self.topic = topic
        self.create(topic, 6)
        group_id = "g-" + topic

        def member(name, state):
            c = Consumer(self.conf(**{"group.id": group_id, "client.id": name, "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest"}))
            c.subscribe([topic], on_assign=lambda _c, ps: note_assignment(state, name, [p.partition for p in ps]),
                        on_revoke=lambda _c, ps: note_assignment(state, name, []))
            deadline = time.time() + LIMIT
            while not all_read(state) and time.time() < deadline:
                m = c.poll(0.3)
                if m is None:
                    continue
                if m.error():
                    raise RuntimeError(str(m.error()))
                note_record(state, m.value().decode())
                c.commit(message=m, asynchronous=False)
            c.close()

        state, threads = split_group([("m1", member), ("m2", member)])
        # Both members hold their share before the records exist, so the split does
        # not depend on how fast one of them reads.
        state["joined"].wait(LIMIT)
        out = self.describe_active(group_id)
        self.send_all(self.producer(), [(p, None, f"{p}:{i}".encode(), None, None)
                                        for p in range(6) for i in range(10)])
        for t in threads:
            t.join(LIMIT + T)
        summarise(out, state)
        [offsets] = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)]).values()
        out["committed_sum"] = sum(tp.offset for tp in offsets.result(timeout=T).topic_partitions)
        listed = self.admin.list_consumer_groups(request_timeout=T).result(timeout=T).valid
        out["group_listed"] = any(g.group_id == group_id for g in listed)
        [described] = self.admin.describe_consumer_groups([group_id], request_timeout=T).values()
        out["group_state_after"] = described.result(timeout=T).state.name
        [deleted] = self.admin.delete_consumer_groups([group_id], request_timeout=T).values()
        deleted.result(timeout=T)
        out["group_deleted"] = True
        return out


TIMESTAMP_TYPES = {0: "NotAvailable", 1: "CreateTime", 2: "LogAppendTime"}


# ---- kafka-python -------------------------------------------------------------------


class KafkaPython:
    def __init__(self, bootstrap):
        from kafka import KafkaAdminClient

        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(T * 1000))

    def producer(self, **extra):
        from kafka import KafkaProducer

        # The defaults: idempotent, acks=all.
        return KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, **extra)

    def consumer(self, **extra):
        from kafka import KafkaConsumer

        return KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", **extra)

    def partitions(self, topic):
        [t] = self.admin.describe_topics([topic])
        return 0 if t["error_code"] else len(t["partitions"])

    def wait_partitions(self, topic, n):
        bounded(f"{n} partitions of {topic}", lambda: self.partitions(topic) == n)
        return self.partitions(topic)

    def create(self, topic, n):
        from kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(topic, n, 1)])
        return self.wait_partitions(topic, n)

    def listed(self, topic):
        return topic in self.admin.list_topics()

    def delete(self, topic):
        self.admin.delete_topics([topic])
        return bool(bounded(f"{topic} to leave the metadata", lambda: not self.listed(topic)))

    def roundtrip(self, topic, codec):
        from kafka import TopicPartition

        out = {"partitions_created": self.create(topic, 3)}
        self.admin.create_partitions({topic: 4})
        out["partitions_after_increase"] = self.wait_partitions(topic, 4)
        out["listed"] = self.listed(topic)
        [t] = self.admin.describe_topics([topic])
        c = self.admin.describe_cluster()
        [node] = c["brokers"]
        out.update(described(
            node["broker_id"], f"{node['host']}:{node['port']}", self.bootstrap, t["is_internal"],
            t["topic_id"] not in (None, str(uuid.UUID(int=0))),
            [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in t["partitions"]],
            [str(op) for op in t["authorized_operations"] or []], len(c["brokers"]), node["rack"],
            c["controller_id"], [str(op) for op in c["authorized_operations"] or []]))

        sent = records(null_header=False)
        p = self.producer(compression_type=None if codec == "none" else codec, max_request_size=4_000_000)
        futures = [p.send(topic, key=k, value=v, headers=h, partition=0, timestamp_ms=ts) for k, v, h, ts in sent]
        placed = [f.get(timeout=T) for f in futures]
        out["placed"] = ",".join(f"{m.partition}@{m.offset}" for m in placed)
        try:
            p.send(topic, value=oversized_value(), partition=1).get(timeout=T)
            out["oversized_error"] = "accepted"
        except Exception as e:  # noqa: BLE001 - the error is the observation
            out["oversized_error"] = type(e).__name__
        p.close(timeout=T)

        keyed_producer = self.producer()
        keyed = [keyed_producer.send(topic, key=f"key-{i}".encode(), value=f"key-{i}".encode()) for i in range(12)]
        out["keyed_partitions"] = ",".join(str(f.get(timeout=T).partition) for f in keyed)
        keyed_producer.close(timeout=T)

        c = self.consumer()
        p0 = TopicPartition(topic, 0)
        low = c.beginning_offsets([p0], timeout_ms=int(T * 1000))[p0]
        high = c.end_offsets([p0], timeout_ms=int(T * 1000))[p0]
        c.assign([p0])
        c.seek_to_beginning(p0)
        got = []
        deadline = time.time() + LIMIT
        while (not got or got[-1].offset < high - 1) and time.time() < deadline:
            for batch in c.poll(timeout_ms=300).values():
                got.extend(batch)
        # Records' leader epochs are left out, as for confluent-kafka.
        compare(out, [(m.key, m.value, list(m.headers), m.timestamp) for m in got], sent)
        if got:
            out["timestamp_type"] = {0: "CreateTime", 1: "LogAppendTime"}.get(got[0].timestamp_type, "none")
            out["first_offset"] = got[0].offset
        out["beginning_offset"], out["end_offset"] = low, high
        at = c.offsets_for_times({p0: FIXED_TS}, timeout_ms=int(T * 1000))[p0]
        out["offset_for_fixed_timestamp"] = -1 if at is None else at.offset
        # No record is that late: kafka-python answers None, as Java's client does.
        future = c.offsets_for_times({p0: 2**62}, timeout_ms=int(T * 1000))[p0]
        out["offset_for_future_timestamp"] = "null" if future is None else future.offset
        c.close()
        out["deleted"] = self.delete(topic)
        return out

    def describe_active(self, group_id, topic):
        """The group described while both members hold their share (Stable); kafka-python
        always asks for the authorized operations."""
        g = self.admin.describe_groups([group_id])[group_id]
        members = g["members"]
        return {
            "active_state": g["group_state"],
            "active_protocol_type": g["protocol_type"],
            "active_assignor": g["protocol_data"],
            "active_members": len(members),
            "active_member_shares": str(sorted(
                sum(len(t["partitions"]) for t in m["member_assignment"]["assigned_partitions"]) for m in members)),
            "active_client_ids": ",".join(sorted(m["client_id"] for m in members)),
            # Kafka names a member "<client id>-<uuid>" and its host "/<address>".
            "active_member_ids_named_by_client": all(m["member_id"].startswith(m["client_id"] + "-")
                                                     for m in members),
            "active_client_hosts": ",".join(sorted({m["client_host"] for m in members})),
            "active_subscribed_to_topic": all(m["member_metadata"]["topics"] == [topic] for m in members),
            "group_operations": ",".join(sorted(str(op) for op in g.get("authorized_operations") or [])),
        }

    def group(self, topic):
        from kafka import ConsumerRebalanceListener

        self.create(topic, 6)
        group_id = "g-" + topic

        class Listener(ConsumerRebalanceListener):
            def __init__(self, name, state):
                self.name, self.state = name, state

            def on_partitions_revoked(self, revoked):
                note_assignment(self.state, self.name, [])

            def on_partitions_assigned(self, assigned):
                note_assignment(self.state, self.name, [tp.partition for tp in assigned])

        def member(name, state):
            c = self.consumer(group_id=group_id, client_id=name)
            c.subscribe([topic], listener=Listener(name, state))
            deadline = time.time() + LIMIT
            while not all_read(state) and time.time() < deadline:
                batches = c.poll(timeout_ms=300)
                for batch in batches.values():
                    for m in batch:
                        note_record(state, m.value.decode())
                if batches:
                    c.commit()
            c.close(autocommit=False)

        state, threads = split_group([("m1", member), ("m2", member)])
        # Both members hold their share before the records exist, so the split does
        # not depend on how fast one of them reads.
        state["joined"].wait(LIMIT)
        out = self.describe_active(group_id, topic)
        p = self.producer()
        for f in [p.send(topic, value=f"{part}:{i}".encode(), partition=part) for part in range(6) for i in range(10)]:
            f.get(timeout=T)
        p.close(timeout=T)
        for t in threads:
            t.join(LIMIT + T)
        summarise(out, state)
        offsets = self.admin.list_group_offsets(group_id)[group_id]
        out["committed_sum"] = sum(o.offset for o in offsets.values())
        out["group_listed"] = any(g["group_id"] == group_id for g in self.admin.list_groups())
        out["group_state_after"] = self.admin.describe_groups([group_id])[group_id]["group_state"]
        out["group_deleted"] = self.admin.delete_groups([group_id])[group_id] == "OK"
        return out


# ---- kcat ---------------------------------------------------------------------------


class Kcat:
    """kcat (Debian's, on the system's librdkafka) as a user runs it: -L -J, -P from
    stdin and from files, -C -J, -Q, and one -G member. kcat has no admin: topics are
    created and the group's committed offsets read with confluent-kafka's AdminClient,
    which is not what is observed."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.helper = Confluent(bootstrap)
        # cargo points LD_LIBRARY_PATH at build outputs for test runs; one of them holds
        # the vendored librdkafka built without SSL, which kcat would load instead.
        self.env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}

    def kcat(self, args, stdin=b"", check=True):
        r = subprocess.run(["kcat", "-b", self.bootstrap, "-m", "15", *args], input=stdin, capture_output=True,
                           env=self.env, timeout=LIMIT)
        if check and r.returncode != 0:
            raise SystemExit(f"kcat {args} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
        return r

    def metadata(self, topic):
        """-L -J of the topic, with the node id and the address (each broker's own
        configuration: node.id=1 in the capture, 0 for an es single node) and the
        topic (each run's own) named."""
        doc = json.loads(self.kcat(["-L", "-J", "-t", topic]).stdout)
        [broker] = doc["brokers"]
        node = broker["id"]

        def named(v):
            if isinstance(v, dict):
                return {k: named(x) for k, x in v.items()}
            if isinstance(v, list):
                return [named(x) for x in v]
            if isinstance(v, str):
                return v.replace(self.bootstrap, "ADDR").replace(f"/{node}", "/NODE")
            return "NODE" if v == node and not isinstance(v, bool) else v

        doc["brokers"] = [{"id": "NODE", "name": named(broker["name"])}]
        for t in doc["topics"]:
            for part in t["partitions"]:
                part["leader"] = named(part["leader"])
                part["replicas"] = named(part["replicas"])
                part["isrs"] = named(part["isrs"])
        doc["controllerid"] = named(doc["controllerid"])
        doc["originating_broker"] = named(doc["originating_broker"])
        return json.dumps(doc, sort_keys=True).replace(json.dumps(topic), '"TOPIC"')

    def consume(self, topic, partition=None):
        """Every record of the topic (or one partition) from the beginning, as -J
        envelopes; key and payload as the bytes kcat printed."""
        where = ["-p", str(partition)] if partition is not None else []
        out = self.kcat(["-C", "-t", topic, *where, "-o", "beginning", "-e", "-J"]).stdout
        docs = [json.loads(x) for x in out.decode("utf-8", "surrogateescape").splitlines() if x]
        for d in docs:
            for field in ("key", "payload"):
                if d.get(field) is not None:
                    d[field] = d[field].encode("utf-8", "surrogateescape")
        return docs

    def query(self, topic, partition, ts):
        out = self.kcat(["-Q", "-J", "-t", f"{topic}:{partition}:{ts}"]).stdout
        return json.loads(out)[topic][str(partition)]["offset"]

    def roundtrip(self, topic, codec):
        out = {"partitions_created": self.helper.create(topic, 3)}
        out["metadata"] = self.metadata(topic)
        z = [] if codec == "none" else ["-z", codec]
        tmp = tempfile.mkdtemp(prefix="kcat-")
        files = {"utf8": b"\xc3\x28\xa0", "png": png()}
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        # Duplicate header keys and a header without a value, on every record of the call;
        # -Z sends the empty value as null.
        self.kcat(["-P", "-t", topic, "-p", "0", "-K", ":", "-Z", "-H", "a=1", "-H", "a=2", "-H", "b", *z],
                  b"\x00bin:hello\ntombstone:\n:nokey\n")
        # Without -Z, an empty key and value stay empty.
        self.kcat(["-P", "-t", topic, "-p", "0", "-K", ":", *z], b":\n")
        # A file is one record, byte for byte, without a key.
        self.kcat(["-P", "-t", topic, "-p", "0", *z, *(os.path.join(tmp, n) for n in files)])
        sent = [
            (b"\x00bin", b"hello", [["a", "1"], ["a", "2"], ["b", None]]),
            (b"tombstone", None, [["a", "1"], ["a", "2"], ["b", None]]),
            (None, b"nokey", [["a", "1"], ["a", "2"], ["b", None]]),
            (b"", b"", []),
            (None, files["utf8"], []),
            (None, files["png"], []),
        ]
        big = os.path.join(tmp, "big")
        with open(big, "wb") as f:
            f.write(oversized_value())
        # The client-side limit above the record, so the broker's limit decides.
        refused = self.kcat(["-P", "-t", topic, "-p", "1", "-X", "message.max.bytes=4000000", *z, big], check=False)
        out["oversized_exit"] = refused.returncode
        out["oversized_error"] = " ".join(x for x in refused.stderr.decode().splitlines() if "failed" in x)
        shutil.rmtree(tmp)

        keys = "".join(f"key-{i}:key-{i}\n" for i in range(12)).encode()
        self.kcat(["-P", "-t", topic, "-K", ":"], keys)
        where = {d["key"].decode(): d["partition"] for d in self.consume(topic) if d["key"] and
                 d["key"].startswith(b"key-")}
        out["keyed_partitions"] = ",".join(str(where.get(f"key-{i}")) for i in range(12))

        got = self.consume(topic, 0)
        seen = [(d.get("key"), d.get("payload"), [list(h) for h in zip(d.get("headers", [])[::2],
                                                                          d.get("headers", [])[1::2])])
                for d in got[: len(sent)]]
        out["consumed"] = len(got)
        out["byte_identical"] = seen == [(k, v, h) for k, v, h in sent]
        if not out["byte_identical"]:
            out["seen"], out["expected"] = repr(seen), repr(sent)
        out["offsets"] = ",".join(str(d["offset"]) for d in got)
        out["timestamp_types"] = ",".join(sorted({d["tstype"] for d in got}))
        out["offset_for_timestamp_0"] = self.query(topic, 0, 0)
        out["offset_for_future_timestamp"] = self.query(topic, 0, 2**62)
        # -1 asks for the end (ListOffsets latest).
        out["end_offset"] = self.query(topic, 0, -1)
        out["deleted"] = self.helper.delete(topic)
        return out

    def group(self, topic):
        self.helper.create(topic, 6)
        for p in range(6):
            self.kcat(["-P", "-t", topic, "-p", str(p)], "".join(f"{p}:{i}\n" for i in range(10)).encode())
        group_id = "g-" + topic
        # One balanced-consumer member (its defaults: auto commit, committed on close),
        # until the end of every partition it was assigned.
        r = self.kcat(["-G", group_id, "-X", "auto.offset.reset=earliest", "-e", "-f", "%p %s\n", topic])
        read = [x.split(" ", 1) for x in r.stdout.decode().splitlines() if x]
        out = {
            "records_read": len({v for _, v in read}),
            "duplicates": len(read) - len({v for _, v in read}),
            "partitions_read": len({p for p, _ in read}),
            "in_partition_order": all(v.startswith(p + ":") for p, v in read),
        }
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.helper.admin
        [offsets] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)]).values()
        out["committed_sum"] = sum(tp.offset for tp in offsets.result(timeout=T).topic_partitions)
        [described] = admin.describe_consumer_groups([group_id], request_timeout=T).values()
        out["group_state_after"] = described.result(timeout=T).state.name
        [deleted] = admin.delete_consumer_groups([group_id], request_timeout=T).values()
        deleted.result(timeout=T)
        out["deleted"] = self.helper.delete(topic)
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=["confluent", "kafka-python", "kcat"])
    parser.add_argument("scenario", choices=["roundtrip", "group"])
    parser.add_argument("bootstrap")
    parser.add_argument("prefix")
    parser.add_argument("codec", nargs="?", default="none")
    args = parser.parse_args()
    client = {"confluent": Confluent, "kafka-python": KafkaPython, "kcat": Kcat}[args.client](args.bootstrap)
    if args.scenario == "roundtrip":
        out = client.roundtrip(f"{args.prefix}-{args.codec}", args.codec)
    else:
        out = client.group(f"{args.prefix}-group")
    print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
