// The Java client (kafka-clients 3.8) with group.protocol=consumer (KIP-848: its consumer sends
// ConsumerGroupHeartbeat v0). Modes:
//   share BOOTSTRAP TOPIC GROUP COUNT   two consumers of one group share a 6-partition topic:
//                                       every record consumed exactly once (commit after
//                                       process), both consumers get partitions, none twice.
//   hold BOOTSTRAP TOPIC GROUP SECONDS  one consumer keeps the group alive; prints "ASSIGNED n"
//                                       with its partition count once it has partitions;
//                                       leaves the group (close) when stdin closes.
// Exits non-zero listing what went wrong; prints a success marker last.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumerProtocolCheck {
    static final int PARTITIONS = 6;

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static void createTopic(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                     .all().get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
        }
    }

    static Set<String> produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        Set<String> values = new HashSet<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                String v = topic + "-" + i;
                values.add(v);
                producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, v));
            }
            producer.flush();
        }
        return values;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2], group = args[3];
        int n = Integer.parseInt(args[4]);
        long timeoutMs = Long.parseLong(System.getenv().getOrDefault("CHECK_TIMEOUT_MS", "120000"));
        createTopic(bootstrap, topic);
        if (mode.equals("hold")) {
            hold(bootstrap, topic, group, n);
            return;
        }
        Set<String> values = produce(bootstrap, topic, n);
        ConcurrentLinkedQueue<String> seen = new ConcurrentLinkedQueue<>();
        List<Set<TopicPartition>> everAssigned = List.of(ConcurrentHashMap.newKeySet(),
                                                         ConcurrentHashMap.newKeySet());
        AtomicBoolean stop = new AtomicBoolean();
        List<String> errors = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            final int idx = i;
            Thread t = new Thread(() -> {
                try (KafkaConsumer<String, String> c = consumer(bootstrap, group)) {
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                        everAssigned.get(idx).addAll(c.assignment());
                        for (ConsumerRecord<String, String> r : recs) {
                            seen.add(r.value());
                            c.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                                new OffsetAndMetadata(r.offset() + 1)));
                        }
                    }
                } catch (Exception e) {
                    errors.add("consumer " + idx + ": " + e);
                }
            });
            t.start();
            threads.add(t);
            Thread.sleep(300);  // the second joins an existing group: a rebalance to share
        }
        long deadline = System.currentTimeMillis() + Math.min(timeoutMs, 90000);
        while (System.currentTimeMillis() < deadline && errors.isEmpty()) {
            if (seen.size() >= values.size() && !everAssigned.get(0).isEmpty()
                    && !everAssigned.get(1).isEmpty()) break;
            Thread.sleep(100);
        }
        Thread.sleep(1000);  // anything delivered twice would show now
        stop.set(true);
        for (Thread t : threads) t.join(30000);
        Map<String, Integer> counts = new HashMap<>();
        for (String v : seen) counts.merge(v, 1, Integer::sum);
        if (!counts.keySet().equals(values))
            errors.add("consumed " + counts.size() + " distinct of " + values.size());
        counts.forEach((v, k) -> { if (k > 1) errors.add(v + " consumed " + k + " times"); });
        for (int i = 0; i < 2; i++)
            if (everAssigned.get(i).isEmpty()) errors.add("consumer " + i + " got no partition");
        if (!errors.isEmpty()) {
            errors.forEach(System.out::println);
            System.exit(1);
        }
        System.out.println("partitions: " + everAssigned);
        System.out.println("CONSUMER PROTOCOL CHECK PASSED");
    }

    static void hold(String bootstrap, String topic, String group, int seconds) {
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (java.io.IOException e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, group)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + seconds * 1000L;
            boolean told = false;
            while (System.currentTimeMillis() < deadline && !stop.get()) {
                c.poll(Duration.ofMillis(100));
                if (!told && !c.assignment().isEmpty()) {
                    System.out.println("ASSIGNED " + c.assignment().size());
                    System.out.flush();
                    told = true;
                }
            }
        }
        System.out.println("HOLD DONE");
    }
}
