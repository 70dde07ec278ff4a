// The Java client (kafka-clients 3.8) over TLS, with Kafka's own PEM settings, and Java's own
// reading of certificate subjects. Two modes:
//   java TlsCheck dn <pem file>...
//     prints X500Principal.getName(RFC2253) of every certificate in the files, one a line as
//     the hex of its UTF-8 (a DN may hold a CR): the subject string Kafka's
//     DefaultKafkaPrincipalBuilder makes a TLS principal of.
//   java TlsCheck clients <bootstrap> <truststore.pem> [<keystore.pem>]
//     security.protocol=SSL, ssl.truststore.type=PEM; with a keystore, ssl.keystore.type=PEM
//     (mutual TLS). Creates a topic, produces 200 records of 1 KiB (acks=all, idempotent) and
//     consumes them in a group with commitSync; every record must come back once, in order.
// Exits 1 listing every failure; prints "JAVA TLS CHECK PASSED" last. Watchdog: CHECK_TIMEOUT_MS.
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.*;
import javax.security.auth.x500.X500Principal;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TlsCheck {
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
        if (args.length >= 2 && args[0].equals("dn")) {
            CertificateFactory factory = CertificateFactory.getInstance("X.509");
            for (int i = 1; i < args.length; i++) {
                try (FileInputStream in = new FileInputStream(args[i])) {
                    for (var cert : factory.generateCertificates(in)) {
                        String dn = ((X509Certificate) cert).getSubjectX500Principal()
                                .getName(X500Principal.RFC2253);
                        System.out.println(HexFormat.of().formatHex(dn.getBytes(StandardCharsets.UTF_8)));
                    }
                }
            }
            return;
        }
        if (args.length < 3 || !args[0].equals("clients")) {
            System.err.println("usage: java TlsCheck dn <pem>... | clients <bootstrap> <truststore.pem> [<keystore.pem>]");
            System.exit(2);
        }
        Properties common = new Properties();
        common.put("bootstrap.servers", args[1]);
        common.put("security.protocol", "SSL");
        common.put("ssl.truststore.type", "PEM");
        common.put("ssl.truststore.location", args[2]);
        if (args.length > 3) {
            common.put("ssl.keystore.type", "PEM");
            common.put("ssl.keystore.location", args[3]);
        }
        String suffix = ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        String topic = "java-tls-" + suffix;
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
            for (int i = 0; i < RECORDS; i++) {
                byte[] value = new byte[1024];
                random.nextBytes(value);
                sent.add(value);
                producer.send(new ProducerRecord<>(topic, 0, "k" + i, value));
            }
            producer.flush();
        }
        Properties c = new Properties();
        c.putAll(common);
        c.put("group.id", "java-tls-group-" + suffix);
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
        if (!failures.isEmpty()) {
            System.err.println(failures.size() + " failure(s): " + failures);
            System.exit(1);
        }
        System.out.println("JAVA TLS CHECK PASSED");
    }
}
