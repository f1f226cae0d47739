// The Apache Kafka Java client logging in to es over SASL_SSL, then producing and
// consuming: SCRAM with a key id and secret, or OAUTHBEARER with a token the caller
// made (tests/tests/auth_clients.rs signs it for es's JWT example plugin). Prints one
// JSON document: the offsets produced, the values read back and the committed offset.
//
//   java -cp ... es.kafka.Auth BOOTSTRAP CA_PEM TOPIC GROUP scram MECHANISM USER PASSWORD
//   java -cp ... es.kafka.Auth BOOTSTRAP CA_PEM TOPIC GROUP oauth TOKEN
//
// Every wait is bounded; a login that fails exits non-zero with the client's error.
package es.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.auth.SaslExtensionsCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Auth {
    private static final Duration DEADLINE = Duration.ofSeconds(60);
    private static final int RECORDS = 3;

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: Auth BOOTSTRAP CA_PEM TOPIC GROUP scram MECHANISM USER PASSWORD"
                    + " | Auth BOOTSTRAP CA_PEM TOPIC GROUP oauth TOKEN");
            System.exit(2);
        }
        Properties props = login(args);
        String topic = args[2];
        List<Long> offsets = produce(props, topic);
        List<String> values = new ArrayList<>();
        long committed = consume(props, topic, args[3], values);
        System.out.println("{\"offsets\": " + offsets + ", \"values\": " + quoted(values)
                + ", \"committed\": " + committed + "}");
        System.out.flush();
        System.exit(0);
    }

    /** The connection properties: SASL_SSL trusting the test CA (a PEM file). */
    private static Properties login(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("security.protocol", "SASL_SSL");
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", args[1]);
        switch (args[4]) {
            case "scram" -> {
                p.put("sasl.mechanism", args[5]);
                p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required"
                        + " username=\"" + args[6] + "\" password=\"" + args[7] + "\";");
            }
            case "oauth" -> {
                p.put("sasl.mechanism", "OAUTHBEARER");
                p.put("sasl.jaas.config",
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
                        + " token=\"" + args[5] + "\";");
                p.put("sasl.login.callback.handler.class", TokenHandler.class.getName());
            }
            default -> throw new IllegalArgumentException("unknown login " + args[4]);
        }
        return p;
    }

    private static List<Long> produce(Properties login, String topic) throws Exception {
        Properties p = new Properties();
        p.putAll(login);
        p.put("acks", "all");
        p.put("max.block.ms", "30000");
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                var record = new ProducerRecord<>(topic, 0, "k" + i, "v" + i);
                offsets.add(producer.send(record).get().offset());
            }
        }
        return offsets;
    }

    /** Reads the records back as a member of GROUP, commits past them; the committed offset. */
    private static long consume(Properties login, String topic, String group, List<String> values) {
        Properties p = new Properties();
        p.putAll(login);
        p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (values.size() < RECORDS && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(values.size())), DEADLINE);
            OffsetAndMetadata got = consumer.committed(Set.of(tp), DEADLINE).get(tp);
            return got == null ? -1 : got.offset();
        }
    }

    private static String quoted(List<String> values) {
        List<String> out = new ArrayList<>();
        for (String v : values) {
            out.add("\"" + v.replace("\\", "\\\\").replace("\"", "\\\"") + "\"");
        }
        return out.toString();
    }

    /**
     * Hands the client the token given as the JAAS option `token`: the Java client's
     * own default handler makes unsigned (`alg: none`) tokens, which es's JWT plugin
     * refuses, and a real deployment would fetch one from its identity provider.
     */
    public static final class TokenHandler implements AuthenticateCallbackHandler {
        private String token;

        @Override
        public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
            Object value = entries.get(0).getOptions().get("token");
            if (value == null) {
                throw new IllegalArgumentException("the JAAS config has no token option");
            }
            token = value.toString();
        }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback callback : callbacks) {
                if (callback instanceof OAuthBearerTokenCallback cb) {
                    cb.token(bearer(token));
                } else if (!(callback instanceof SaslExtensionsCallback)) {
                    // No SASL extensions: the default (none) is what es expects.
                    throw new UnsupportedCallbackException(callback);
                }
            }
        }

        @Override
        public void close() {}

        private static OAuthBearerToken bearer(String value) {
            long now = System.currentTimeMillis();
            return new OAuthBearerToken() {
                public String value() { return value; }
                public Set<String> scope() { return Collections.emptySet(); }
                // The client refreshes its login before this; the broker checks `exp`.
                public long lifetimeMs() { return now + 3_600_000L; }
                public String principalName() { return "es-jwt"; }
                public Long startTimeMs() { return now; }
            };
        }
    }
}
