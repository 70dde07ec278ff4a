// The Java client (kafka-clients 3.8) over SASL, with Kafka's own client properties:
//   java SaslCheck <bootstrap> <SASL_SSL|SASL_PLAINTEXT> <PLAIN|SCRAM-SHA-256|SCRAM-SHA-512>
//                  <user> <password> <name prefix> [<truststore.pem>]
// sasl.jaas.config through PlainLoginModule or ScramLoginModule; with a truststore,
// ssl.truststore.type=PEM. As that user: creates a topic named <prefix>..., produces 200 records
// of 1 KiB (acks=all, idempotent) and consumes them in group <prefix>... with commitSync; every
// record must come back once, in order, and the committed offset must be 200. Then the same
// user with a wrong password: an Admin call must fail with SaslAuthenticationException.
// Exits 1 listing every failure; prints "JAVA SASL CHECK PASSED" last. Watchdog: CHECK_TIMEOUT_MS.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.*;

public class SaslCheck {
    static final int RECORDS = 200;
    static final List<String> failures = new ArrayList<>();

    static void check(boolean cond, String msg) {
        if (!cond) {
            failures.add(msg);
            System.err.println("FAIL: " + msg);
        }
    }

    static Properties security(String[] args, String password) {
        String mechanism = args[2];
        String module = mechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("security.protocol", args[1]);
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", module + " required username=\"" + args[3] + "\" password=\""
                + password + "\";");
        if (args.length > 6) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", args[6]);
        }
        return p;
    }

    public static void main(String[] args) throws Exception {
        long deadlineMs = Long.parseLong(Objects.requireNonNullElse(System.getenv("CHECK_TIMEOUT_MS"), "150000"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(deadlineMs);
                System.err.println("FAIL: whole check exceeded " + deadlineMs + " ms");
                Runtime.getRuntime().halt(1);
            } catch (InterruptedException ignored) {
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        if (args.length < 6) {
            System.err.println("usage: java SaslCheck <bootstrap> <protocol> <mechanism> <user> <password> <prefix> [<truststore.pem>]");
            System.exit(2);
        }
        Properties common = security(args, args[4]);
        String suffix = ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        String topic = args[5] + "topic-" + suffix;
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        List<byte[]> sent = new ArrayList<>();
        Random random = new Random(42);
        Properties p = new Properties();
        p.putAll(common);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        try (Producer<String, byte[]> producer = new KafkaProducer<>(p, new StringSerializer(), new ByteArraySerializer())) {
            List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                byte[] value = new byte[1024];
                random.nextBytes(value);
                sent.add(value);
                acks.add(producer.send(new ProducerRecord<>(topic, 0, "k" + i, value)));
            }
            producer.flush();
            // A refused write shows here (flush alone does not report it).
            acks.get(RECORDS - 1).get(30, TimeUnit.SECONDS);
        }
        Properties c = new Properties();
        c.putAll(common);
        c.put("group.id", args[5] + "group-" + suffix);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        List<byte[]> got = new ArrayList<>();
        try (Consumer<String, byte[]> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            long until = System.currentTimeMillis() + 60_000;
            while (got.size() < RECORDS && System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    check(r.key().equals("k" + got.size()), "key at offset " + r.offset() + ": " + r.key());
                    got.add(r.value());
                }
            }
            consumer.commitSync();
            TopicPartition tp = new TopicPartition(topic, 0);
            OffsetAndMetadata committed = consumer.committed(Set.of(tp)).get(tp);
            check(committed != null && committed.offset() == RECORDS, "committed offset " + committed);
        }
        check(got.size() == RECORDS, "consumed " + got.size() + " of " + RECORDS);
        for (int i = 0; i < Math.min(got.size(), sent.size()); i++) {
            if (!Arrays.equals(got.get(i), sent.get(i))) {
                check(false, "record " + i + " differs from what was sent");
                break;
            }
        }
        Properties wrong = security(args, args[4] + "-wrong");
        wrong.put("default.api.timeout.ms", "20000");
        wrong.put("request.timeout.ms", "10000");
        try (Admin admin = Admin.create(wrong)) {
            admin.describeCluster().clusterId().get();
            check(false, "a wrong password was accepted");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof SaslAuthenticationException,
                    "wrong password: " + e.getCause());
        }
        if (!failures.isEmpty()) {
            System.err.println(failures.size() + " failure(s): " + failures);
            System.exit(1);
        }
        System.out.println("JAVA SASL CHECK PASSED");
    }
}
