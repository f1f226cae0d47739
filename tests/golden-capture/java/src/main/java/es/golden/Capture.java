// Sends the records of records.tsv to partition 0 of one topic as a single batch, so the
// broker's segment file holds exactly the batch this client encoded.
//
// usage: Capture BOOTSTRAP TOPIC CODEC IDEMPOTENT RECORDS_TSV
package es.golden;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public final class Capture {
    private Capture() {}

    /** "-" is null, "." is empty, anything else is hex. */
    static byte[] bytes(String field) {
        if (field.equals("-")) {
            return null;
        }
        if (field.equals(".")) {
            return new byte[0];
        }
        return HexFormat.of().parseHex(field);
    }

    static ProducerRecord<byte[], byte[]> parse(String topic, String line) {
        String[] cols = line.split("\t", -1);
        RecordHeaders headers = new RecordHeaders();
        if (!cols[3].equals(".")) {
            for (String pair : cols[3].split(",")) {
                String[] kv = pair.split(":", -1);
                headers.add(new RecordHeader(new String(bytes(kv[0]), StandardCharsets.UTF_8), bytes(kv[1])));
            }
        }
        return new ProducerRecord<>(topic, 0, Long.parseLong(cols[0]), bytes(cols[1]), bytes(cols[2]), headers);
    }

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        boolean idempotent = Boolean.parseBoolean(args[3]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args[2]);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        props.put(ProducerConfig.ACKS_CONFIG, idempotent ? "all" : "1");
        // One batch: nothing leaves before flush(), and the batch has room for all records.
        props.put(ProducerConfig.LINGER_MS_CONFIG, "30000");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            // Fetch metadata (and auto-create the topic) before the first send is queued.
            producer.partitionsFor(topic);
            for (String line : Files.readAllLines(Path.of(args[4]), StandardCharsets.UTF_8)) {
                if (!line.startsWith("#") && !line.isBlank()) {
                    acks.add(producer.send(parse(topic, line)));
                }
            }
            producer.flush();
            for (Future<RecordMetadata> ack : acks) {
                ack.get();
            }
        }
        System.out.println(topic + ": " + acks.size() + " records (kafka-clients " + AppInfoParser.getVersion() + ")");
    }
}
