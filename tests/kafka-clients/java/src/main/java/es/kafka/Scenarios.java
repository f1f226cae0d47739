// The Apache Kafka Java client through es's Kafka scenarios. Each scenario prints one
// JSON document of what the client observed, so tests/tests/kafka_java.rs can check it
// against es and compare it with what the same scenario observed on Apache Kafka.
//
//   java -cp ... es.kafka.Scenarios roundtrip BOOTSTRAP TOPIC CODEC
//   java -cp ... es.kafka.Scenarios group BOOTSTRAP TOPIC
//   java -cp ... es.kafka.Scenarios admin BOOTSTRAP TOPIC
//   java -cp ... es.kafka.Scenarios epochs BOOTSTRAP TOPIC
//   java -cp ... es.kafka.Scenarios failover BOOTSTRAP TOPIC MARKER
//   java -cp ... es.kafka.Scenarios rack BOOTSTRAP TOPIC RACK COUNT
//
// Every wait is bounded; a scenario that cannot finish exits non-zero with the reason.
package es.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Scenarios {
    private static final long FIXED_TS = 1_700_000_000_000L;
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Scenarios roundtrip BOOTSTRAP TOPIC CODEC | group BOOTSTRAP TOPIC");
            System.exit(2);
        }
        String out;
        switch (args[0]) {
            case "roundtrip" -> out = roundtrip(args[1], args[2], args.length > 3 ? args[3] : "none");
            case "group" -> out = group(args[1], args[2]);
            case "admin" -> out = admin(args[1], args[2]);
            case "epochs" -> out = epochs(args[1], args[2]);
            case "failover" -> out = failover(args[1], args[2], args[3]);
            case "rack" -> out = rack(args[1], args[2], args[3], Integer.parseInt(args[4]));
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
                return;
            }
        }
        System.out.println(out);
        System.out.flush();
        // The clients' threads are done; don't wait on JVM shutdown hooks of idle pools.
        System.exit(0);
    }

    // ---- roundtrip: admin, idempotent produce (acks=all), consume byte-identical ----

    private static String roundtrip(String bootstrap, String topic, String codec) throws Exception {
        Json j = new Json();
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get(30, TimeUnit.SECONDS);
            j.put("partitions_created", partitionCount(admin, topic));
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get(30, TimeUnit.SECONDS);
            j.put("partitions_after_increase", waitPartitions(admin, topic, 4));
            j.put("listed", admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
        }

        List<ProducerRecord<byte[], byte[]>> sent = records(topic);
        List<String> placed = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, codec))) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : sent) {
                acks.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> f : acks) {
                RecordMetadata m = f.get(30, TimeUnit.SECONDS);
                placed.add(m.partition() + "@" + m.offset());
            }
            // Keyed records without a partition: the default partitioner (murmur2 of the key).
            List<String> keyed = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                byte[] key = ("key-" + i).getBytes();
                keyed.add(Integer.toString(producer.send(new ProducerRecord<>(topic, key, key)).get(30, TimeUnit.SECONDS).partition()));
            }
            j.put("keyed_partitions", String.join(",", keyed));
            j.put("oversized_error", oversized(producer, topic));
        }
        j.put("placed", String.join(",", placed));

        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
            TopicPartition p0 = new TopicPartition(topic, 0);
            consumer.assign(List.of(p0));
            consumer.seekToBeginning(List.of(p0));
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            long end = System.nanoTime() + DEADLINE.toNanos();
            while (got.size() < sent.size() && System.nanoTime() < end) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(r);
                }
            }
            // Partition 0 also holds the keyed records that hashed there; compare the fixed ones.
            List<String> seen = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : got.subList(0, Math.min(got.size(), sent.size()))) {
                seen.add(describe(r));
            }
            List<String> expected = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : sent) {
                expected.add(describe(r));
            }
            j.put("consumed", got.size());
            j.put("byte_identical", seen.equals(expected));
            if (!seen.equals(expected)) {
                j.put("seen", String.join(" | ", seen));
                j.put("expected", String.join(" | ", expected));
            }
            j.put("timestamp_type", got.isEmpty() ? "none" : got.get(0).timestampType().toString());
            j.put("first_offset", got.isEmpty() ? -1 : got.get(0).offset());
            Map<TopicPartition, OffsetAndTimestamp> byTime = consumer.offsetsForTimes(Map.of(p0, FIXED_TS), Duration.ofSeconds(30));
            OffsetAndTimestamp at = byTime.get(p0);
            j.put("offset_for_fixed_timestamp", at == null ? -1 : at.offset());
            Map<TopicPartition, OffsetAndTimestamp> future = consumer.offsetsForTimes(Map.of(p0, Long.MAX_VALUE / 2), Duration.ofSeconds(30));
            j.put("offset_for_future_timestamp", future.get(p0) == null ? "null" : Long.toString(future.get(p0).offset()));
            j.put("end_offset", consumer.endOffsets(List.of(p0), Duration.ofSeconds(30)).get(p0));
            j.put("beginning_offset", consumer.beginningOffsets(List.of(p0), Duration.ofSeconds(30)).get(p0));
        }

        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            j.put("deleted", waitGone(admin, topic));
        }
        return j.toString();
    }

    /// The records of the round trip, all to partition 0 so their order is fixed:
    /// binary keys, duplicate header keys, a null header value, null vs empty values,
    /// invalid UTF-8, a PNG signature, an explicit timestamp.
    private static List<ProducerRecord<byte[], byte[]>> records(String topic) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        List<Header> dup = List.of(
            new RecordHeader("a", "1".getBytes()), new RecordHeader("a", "2".getBytes()), new RecordHeader("b", null));
        out.add(new ProducerRecord<>(topic, 0, (Long) null, new byte[] {0, 10, (byte) 0xff}, "hello".getBytes(), dup));
        out.add(new ProducerRecord<>(topic, 0, (Long) null, (byte[]) null, new byte[0]));
        out.add(new ProducerRecord<>(topic, 0, (Long) null, "tombstone".getBytes(), (byte[]) null));
        out.add(new ProducerRecord<>(topic, 0, FIXED_TS, "utf8".getBytes(), new byte[] {(byte) 0xc3, 0x28, (byte) 0xa0}));
        byte[] png = new byte[300];
        byte[] sig = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        System.arraycopy(sig, 0, png, 0, sig.length);
        for (int i = sig.length; i < png.length; i++) {
            png[i] = (byte) (i * 31 + 7);
        }
        out.add(new ProducerRecord<>(topic, 0, FIXED_TS + 5, "png".getBytes(), png));
        return out;
    }

    /// A record over the broker's limit (es and Kafka default to 1 MiB): the exception
    /// the client surfaces, without retrying forever.
    private static String oversized(KafkaProducer<byte[], byte[]> producer, String topic) throws Exception {
        // Incompressible, so every codec leaves it over the limit.
        byte[] big = new byte[1_100_000];
        new java.util.Random(42).nextBytes(big);
        try {
            producer.send(new ProducerRecord<>(topic, 1, (byte[]) null, big)).get(60, TimeUnit.SECONDS);
            return "accepted";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    private static String describe(ConsumerRecord<byte[], byte[]> r) {
        return line(r.key(), r.value(), r.headers().toArray(), r.timestamp());
    }

    private static String describe(ProducerRecord<byte[], byte[]> r) {
        return line(r.key(), r.value(), r.headers().toArray(), r.timestamp() == null ? -1 : r.timestamp());
    }

    /// key, value, headers in order; the timestamp only where the producer fixed it.
    private static String line(byte[] key, byte[] value, Header[] headers, long ts) {
        StringBuilder b = new StringBuilder();
        b.append(b64(key)).append('/').append(b64(value)).append('/');
        for (Header h : headers) {
            b.append(h.key()).append('=').append(b64(h.value())).append(';');
        }
        if (ts >= FIXED_TS && ts < FIXED_TS + 1000) {
            b.append("/ts=").append(ts);
        }
        return b.toString();
    }

    private static String b64(byte[] v) {
        return v == null ? "null" : "'" + Base64.getEncoder().encodeToString(v) + "'";
    }

    // ---- group: two members divide a 6-partition topic; nothing read twice or missed ----

    private static String group(String bootstrap, String topic) throws Exception {
        Json j = new Json();
        int partitions = 6;
        int perPartition = 10;
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            waitPartitions(admin, topic, partitions);
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "none"))) {
            for (int p = 0; p < partitions; p++) {
                for (int i = 0; i < perPartition; i++) {
                    producer.send(new ProducerRecord<>(topic, p, (byte[]) null, (p + ":" + i).getBytes()));
                }
            }
            producer.flush();
        }
        String groupId = "g-" + topic;
        int total = partitions * perPartition;
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger();
        Map<String, Set<Integer>> assigned = new ConcurrentHashMap<>();
        List<Thread> members = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        for (String name : List.of("m1", "m2")) {
            Thread t = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap, groupId))) {
                    c.subscribe(List.of(topic));
                    long end = System.nanoTime() + DEADLINE.toNanos();
                    // Both members stay until everything is read, so the split stays two-way.
                    while (seen.size() < total && System.nanoTime() < end) {
                        ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<byte[], byte[]> r : batch) {
                            if (!seen.add(new String(r.value()))) {
                                duplicates.incrementAndGet();
                            }
                        }
                        Set<Integer> mine = new HashSet<>();
                        for (TopicPartition tp : c.assignment()) {
                            mine.add(tp.partition());
                        }
                        if (!mine.isEmpty()) {
                            assigned.put(name, mine);
                        }
                        c.commitSync(Duration.ofSeconds(30));
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            t.start();
            members.add(t);
        }
        for (Thread t : members) {
            t.join(DEADLINE.toMillis() + 30_000);
        }
        if (!failures.isEmpty()) {
            throw new RuntimeException("a group member failed", failures.get(0));
        }
        j.put("records_read", seen.size());
        j.put("duplicates", duplicates.get());
        List<Integer> shape = new ArrayList<>();
        Set<Integer> union = new HashSet<>();
        boolean overlap = false;
        for (Set<Integer> s : assigned.values()) {
            shape.add(s.size());
            for (Integer p : s) {
                overlap |= !union.add(p);
            }
        }
        Collections.sort(shape);
        j.put("assignment_shape", shape.toString());
        j.put("assignment_overlap", overlap);
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            long sum = 0;
            for (OffsetAndMetadata o : committed.values()) {
                sum += o.offset();
            }
            j.put("committed_sum", sum);
            Collection<String> listed = new ArrayList<>();
            admin.listGroups().all().get(30, TimeUnit.SECONDS).forEach(g -> listed.add(g.groupId()));
            j.put("group_listed", listed.contains(groupId));
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(groupId)).all().get(30, TimeUnit.SECONDS).get(groupId);
            j.put("group_state_after", d.groupState().toString());
            admin.deleteConsumerGroups(List.of(groupId)).all().get(30, TimeUnit.SECONDS);
            j.put("group_deleted", true);
        }
        return j.toString();
    }

    // ---- admin: what the AdminClient describes (authorized operations) ----

    private static String admin(String bootstrap, String topic) throws Exception {
        Json j = new Json();
        String groupId = topic + "-group";
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            waitPartitions(admin, topic, 1);
            TopicDescription t = admin.describeTopics(List.of(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                .allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            j.put("topic_operations", names(t.authorizedOperations()));
            TopicDescription plain = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            j.put("topic_operations_not_asked", names(plain.authorizedOperations()));
            j.put("cluster_operations", names(admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                .authorizedOperations().get(30, TimeUnit.SECONDS)));
            j.put("cluster_operations_not_asked", names(admin.describeCluster().authorizedOperations().get(30, TimeUnit.SECONDS)));

            // DescribeLogDirs of every node: the partition is in one of its dirs.
            List<Integer> ids = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get(30, TimeUnit.SECONDS)) {
                ids.add(n.id());
            }
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(ids).allDescriptions().get(30, TimeUnit.SECONDS);
            int dirCount = 0;
            boolean holds = false;
            boolean sized = true;
            String dirError = "none";
            for (Map<String, LogDirDescription> perNode : dirs.values()) {
                for (LogDirDescription d : perNode.values()) {
                    dirCount++;
                    holds |= d.replicaInfos().containsKey(new TopicPartition(topic, 0));
                    sized &= d.totalBytes().isPresent() && d.usableBytes().isPresent()
                        && d.usableBytes().getAsLong() <= d.totalBytes().getAsLong();
                    if (d.error() != null) {
                        dirError = d.error().getClass().getSimpleName();
                    }
                }
            }
            j.put("log_dir_count", dirCount);
            j.put("log_dir_holds_partition", holds);
            j.put("log_dir_sized", sized);
            j.put("log_dir_error", dirError);

            // A group that exists (Empty, with a committed offset), then described.
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap, groupId))) {
                c.assign(List.of(new TopicPartition(topic, 0)));
                c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0)));
            }
            ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(groupId),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                .all().get(30, TimeUnit.SECONDS).get(groupId);
            j.put("group_state", g.groupState().toString());
            j.put("group_operations", names(g.authorizedOperations()));
            admin.deleteConsumerGroups(List.of(groupId)).all().get(30, TimeUnit.SECONDS);
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            j.put("deleted", waitGone(admin, topic));
        }
        return j.toString();
    }

    // ---- epochs: a consumer validating its position (OffsetForLeaderEpoch, KIP-320) ----

    private static String epochs(String bootstrap, String topic) throws Exception {
        Json j = new Json();
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            waitPartitions(admin, topic, 1);
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "none"))) {
            for (int i = 0; i < 6; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes())).get(30, TimeUnit.SECONDS);
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
            consumer.assign(List.of(p0));
            consumer.seekToBeginning(List.of(p0));
            List<ConsumerRecord<byte[], byte[]>> all = pollUntil(consumer, 6);
            // One leader epoch for every record (its value is the broker's own: a new
            // Kafka partition starts at 0, an es single node leads in epoch 1).
            long epochs = all.stream().map(r -> r.leaderEpoch().orElse(-1)).distinct().count();
            j.put("record_epoch_count", epochs);
            j.put("record_epochs_known", all.stream().allMatch(r -> r.leaderEpoch().isPresent()));
            int epoch = all.isEmpty() ? 0 : all.get(0).leaderEpoch().orElse(0);
            // A position with the epoch it was read in validates and is kept.
            consumer.seek(p0, new OffsetAndMetadata(3, Optional.of(epoch), ""));
            List<ConsumerRecord<byte[], byte[]>> kept = pollUntil(consumer, 1);
            j.put("validated_first_offset", kept.isEmpty() ? -1 : kept.get(0).offset());
            // At the end of the log: validated, and the next record is read from there.
            consumer.seek(p0, new OffsetAndMetadata(6, Optional.of(epoch), ""));
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "none"))) {
                producer.send(new ProducerRecord<>(topic, 0, null, "v6".getBytes())).get(30, TimeUnit.SECONDS);
            }
            List<ConsumerRecord<byte[], byte[]>> next = pollUntil(consumer, 1);
            j.put("validated_at_end_next_offset", next.isEmpty() ? -1 : next.get(0).offset());
        } catch (Exception e) {
            j.put("error", e.getClass().getSimpleName());
        }
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            j.put("deleted", waitGone(admin, topic));
        }
        return j.toString();
    }

    // ---- failover: produce and consume partition 0 through a leader kill ----
    //
    // The default producer (idempotent, acks=all) writes without stopping; MARKER.half
    // appears once 200 records are acknowledged, and the test kills the partition's
    // leader and creates MARKER.killed; 200 more are acknowledged after it. A consumer
    // reads the partition from offset 0 the whole time, so it goes through the
    // failover too (NOT_LEADER_OR_FOLLOWER, a metadata refresh, and the position
    // validated against the new leader's epochs, KIP-320).

    private static String failover(String bootstrap, String topic, String marker) throws Exception {
        Json j = new Json();
        Map<String, Long> acked = new ConcurrentHashMap<>();
        Map<String, Integer> errors = new ConcurrentHashMap<>();
        Map<String, Long> seen = new ConcurrentHashMap<>();
        AtomicInteger consumedTwice = new AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean producing = new java.util.concurrent.atomic.AtomicBoolean(true);
        java.util.concurrent.atomic.AtomicReference<String> consumerError = new java.util.concurrent.atomic.AtomicReference<>("none");
        TopicPartition p0 = new TopicPartition(topic, 0);
        Thread reader = new Thread(() -> {
            Properties props = consumerProps(bootstrap, null);
            props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
                consumer.assign(List.of(p0));
                consumer.seekToBeginning(List.of(p0));
                long end = System.nanoTime() + Duration.ofSeconds(150).toNanos();
                while (System.nanoTime() < end && (producing.get() || !seen.keySet().containsAll(acked.keySet()))) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        if (seen.put(new String(r.value()), r.offset()) != null) {
                            consumedTwice.incrementAndGet();
                        }
                    }
                }
            } catch (Exception e) {
                consumerError.set(e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        });
        reader.start();

        Properties props = producerProps(bootstrap, "none");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        java.nio.file.Path half = java.nio.file.Path.of(marker + ".half");
        java.nio.file.Path killed = java.nio.file.Path.of(marker + ".killed");
        long ackedAtKill = -1;
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            int sent = 0;
            while (System.nanoTime() < deadline) {
                String value = "v" + sent++;
                producer.send(new ProducerRecord<>(topic, 0, null, value.getBytes()), (m, e) -> {
                    if (e == null) {
                        acked.put(value, m.offset());
                    } else {
                        errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                    }
                });
                if (sent % 20 == 0) {
                    producer.flush();
                }
                if (acked.size() >= 200 && !java.nio.file.Files.exists(half)) {
                    java.nio.file.Files.createFile(half);
                }
                if (ackedAtKill < 0 && java.nio.file.Files.exists(killed)) {
                    ackedAtKill = acked.size();
                }
                if (ackedAtKill >= 0 && acked.size() >= ackedAtKill + 200) {
                    break;
                }
            }
            producer.flush();
        }
        producing.set(false);
        reader.join(Duration.ofSeconds(170).toMillis());

        int missing = 0;
        int moved = 0;
        for (Map.Entry<String, Long> a : acked.entrySet()) {
            Long at = seen.get(a.getKey());
            if (at == null) {
                missing++;
            } else if (!at.equals(a.getValue())) {
                moved++;
            }
        }
        Set<Long> offsets = new HashSet<>(acked.values());
        j.put("acked", acked.size());
        j.put("acked_after_kill", ackedAtKill < 0 ? -1 : acked.size() - ackedAtKill);
        j.put("offsets_unique", offsets.size() == acked.size());
        j.put("missing_count", missing);
        j.put("moved_count", moved);
        j.put("consumed_twice", consumedTwice.get());
        j.put("consumer_error", consumerError.get());
        List<String> names = new ArrayList<>(errors.keySet());
        Collections.sort(names);
        j.put("errors", String.join(",", names));
        return j.toString();
    }

    // ---- rack: a consumer that names its rack reads from the replica there (KIP-392) ----
    //
    // Partition 0 holds COUNT records. A consumer with client.rack=RACK reads them
    // from offset 0, then COUNT more that a producer writes meanwhile (so it goes on
    // fetching where it was sent). Printed: what it read, and each replica's rack as
    // Metadata lists it; the test checks which broker served the fetches.

    private static String rack(String bootstrap, String topic, String rack, int count) throws Exception {
        Json j = new Json();
        TopicPartition p0 = new TopicPartition(topic, 0);
        Properties props = consumerProps(bootstrap, null);
        props.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(p0));
            consumer.seekToBeginning(List.of(p0));
            List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>(pollUntil(consumer, count));
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "none"))) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ("late-" + i).getBytes())).get(30, TimeUnit.SECONDS);
                }
            }
            all.addAll(pollUntil(consumer, count));
            j.put("consumed", all.size());
            boolean dense = true;
            for (int i = 0; i < all.size(); i++) {
                dense &= all.get(i).offset() == i;
            }
            j.put("offsets_dense", dense);
            j.put("last_value", all.isEmpty() ? "" : new String(all.get(all.size() - 1).value()));
            List<String> racks = new ArrayList<>();
            for (Node n : consumer.partitionsFor(topic).get(0).replicas()) {
                racks.add(n.id() + "=" + n.rack());
            }
            Collections.sort(racks);
            j.put("racks", String.join(",", racks));
        } catch (Exception e) {
            j.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        return j.toString();
    }

    /// Polls until `want` records came or the deadline passed, bounded.
    private static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> consumer, int want) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (got.size() < want && System.nanoTime() < end) {
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        return got;
    }

    /// Operations sorted by name ("null" when the broker omitted them).
    private static String names(Set<AclOperation> ops) {
        if (ops == null) {
            return "null";
        }
        List<String> out = new ArrayList<>();
        for (AclOperation op : ops) {
            out.add(op.name());
        }
        Collections.sort(out);
        return String.join(",", out);
    }

    // ---- helpers ----

    private static int partitionCount(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        return d.partitions().size();
    }

    /// Metadata may lag a create or an increase for a moment; wait for it, bounded.
    private static int waitPartitions(Admin admin, String topic, int want) throws Exception {
        long end = System.nanoTime() + DEADLINE.toNanos();
        int n = -1;
        while (System.nanoTime() < end) {
            try {
                n = partitionCount(admin, topic);
                if (n == want) {
                    return n;
                }
            } catch (ExecutionException e) {
                // Not visible yet.
            }
            Thread.sleep(100);
        }
        return n;
    }

    private static boolean waitGone(Admin admin, String topic) throws Exception {
        long end = System.nanoTime() + DEADLINE.toNanos();
        while (System.nanoTime() < end) {
            if (!admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic)) {
                return true;
            }
            Thread.sleep(100);
        }
        return false;
    }

    private static Properties adminProps(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    /// Defaults kept on purpose: acks=all and enable.idempotence=true (Kafka >= 3.0).
    private static Properties producerProps(String bootstrap, String codec) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "4000000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return p;
    }

    private static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return p;
    }

    /// A flat JSON object of strings, numbers and booleans, in insertion order.
    private static final class Json {
        private final StringBuilder b = new StringBuilder("{");

        void put(String key, Object value) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(quote(key)).append(':');
            if (value instanceof Number || value instanceof Boolean) {
                b.append(value);
            } else {
                b.append(quote(String.valueOf(value)));
            }
        }

        private static String quote(String s) {
            StringBuilder q = new StringBuilder("\"");
            for (char c : s.toCharArray()) {
                switch (c) {
                    case '"' -> q.append("\\\"");
                    case '\\' -> q.append("\\\\");
                    default -> {
                        if (c < 0x20) {
                            q.append(String.format("\\u%04x", (int) c));
                        } else {
                            q.append(c);
                        }
                    }
                }
            }
            return q.append('"').toString();
        }

        @Override
        public String toString() {
            return b + "}";
        }
    }
}
