// The Java client (kafka-clients 3.8) with the client properties it is given, as a user sets
// them (Kafka's own names: security.protocol, ssl.truststore.type=PEM, sasl.jaas.config...):
//   java ClientsCheck <name prefix> <key=value>...
// Creates a topic named <prefix>..., produces 200 records of 1 KiB (acks=all, idempotent) and
// consumes them in group <prefix>... with commitSync; every record must come back once, in
// order, and the committed offset must be 200. With a sasl.jaas.config, the same login with a
// wrong password (password="<it>-wrong") must then fail an Admin call with
// SaslAuthenticationException.
// Exits 1 listing every failure; prints "JAVA CLIENTS CHECK PASSED" last. Watchdog:
// CHECK_TIMEOUT_MS.
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

public class ClientsCheck {
    static final int RECORDS = 200;
    static final List<String> failures = new ArrayList<>();

    static void check(boolean cond, String msg) {
        if (!cond) {
            failures.add(msg);
            System.err.println("FAIL: " + msg);
        }
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
        if (args.length < 2) {
            System.err.println("usage: java ClientsCheck <name prefix> <key=value>...");
            System.exit(2);
        }
        Properties common = new Properties();
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            common.put(kv[0], kv[1]);
        }
        String prefix = args[0];
        String suffix = ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        String topic = prefix + "topic-" + suffix;
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
        c.put("group.id", prefix + "group-" + suffix);
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
        String jaas = common.getProperty("sasl.jaas.config");
        if (jaas != null) {
            Properties wrong = new Properties();
            wrong.putAll(common);
            wrong.put("sasl.jaas.config", jaas.replaceFirst("password=\"([^\"]*)\"", "password=\"$1-wrong\""));
            wrong.put("default.api.timeout.ms", "20000");
            wrong.put("request.timeout.ms", "10000");
            try (Admin admin = Admin.create(wrong)) {
                admin.describeCluster().clusterId().get();
                check(false, "a wrong password was accepted");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof SaslAuthenticationException,
                        "wrong password: " + e.getCause());
            }
        }
        if (!failures.isEmpty()) {
            System.err.println(failures.size() + " failure(s): " + failures);
            System.exit(1);
        }
        System.out.println("JAVA CLIENTS CHECK PASSED");
    }
}
