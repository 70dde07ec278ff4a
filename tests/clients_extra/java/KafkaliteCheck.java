// The plain Java client (kafka-clients 3.8, from the Kafka anchor) against kafkalite: AdminClient
// topic creation, cluster and config descriptions; an idempotent producer with default settings (acks=all);
// two consumers in one group with the default assignor list (Range, CooperativeSticky) that
// must receive every record exactly once with commitSync; offsetsForTimes; committed offsets
// and group deletion through the AdminClient. Every step runs even when an earlier one failed
// (where it can), so one run lists every incompatibility; exits 1 if any check failed.
// Usage: java KafkaliteCheck <bootstrap> [default|cooperative-sticky]: the second argument picks
// the consumers' assignor (the default list elects range). A watchdog ends the run after CHECK_TIMEOUT_MS.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.*;

public class KafkaliteCheck {
    static final int TOTAL = 1000;
    static final int PARTITIONS = 3;
    static final List<String> failures = Collections.synchronizedList(new ArrayList<>());

    interface Step { void run() throws Exception; }

    static void fail(String msg) {
        failures.add(msg);
        System.err.println("FAIL: " + msg);
    }

    static boolean check(boolean cond, String msg) {
        if (!cond) fail(msg);
        return cond;
    }

    static void step(String name, Step s) {
        long t = System.nanoTime();
        try {
            s.run();
            System.out.printf("ok   %s (%d ms)%n", name, (System.nanoTime() - t) / 1_000_000);
        } catch (Throwable e) {
            Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            fail(name + ": " + root.getClass().getName() + ": " + root.getMessage());
        }
    }

    record Seen(String consumer, int partition, long offset, String key, String value,
                Map<String, String> headers, long timestamp) {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args.length > 0 ? args[0] : System.getenv("KAFKA_BOOTSTRAP");
        if (bootstrap == null) {
            System.err.println("usage: java KafkaliteCheck <bootstrap host:port>");
            System.exit(2);
        }
        long deadlineMs = Long.parseLong(Objects.requireNonNullElse(System.getenv("CHECK_TIMEOUT_MS"), "150000"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(deadlineMs);
                System.err.println("FAIL: whole check exceeded " + deadlineMs + " ms; failures so far: " + failures);
                Runtime.getRuntime().halt(1);
            } catch (InterruptedException ignored) {
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();

        String assignor = args.length > 1 ? args[1] : "default";
        String suffix = ProcessHandle.current().pid() + "-" + System.currentTimeMillis();
        String topic = "java-check-" + suffix;
        String group = "java-group-" + suffix;
        // Explicit increasing CreateTime timestamps in the past make offsetsForTimes checkable.
        long t0 = System.currentTimeMillis() - 3_600_000L;

        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("request.timeout.ms", "15000");
        common.put("default.api.timeout.ms", "30000");

        Properties adminProps = new Properties();
        adminProps.putAll(common);
        adminProps.put("client.id", "kafkalite-java-admin");
        Admin admin = Admin.create(adminProps);

        step("admin.createTopics (3 partitions)", () ->
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS));

        step("admin.describeCluster", () -> {
            DescribeClusterResult c = admin.describeCluster();
            Collection<Node> nodes = c.nodes().get();
            Node controller = c.controller().get();
            String clusterId = c.clusterId().get();
            check(nodes.size() == 1, "describeCluster nodes " + nodes);
            check(controller != null && nodes.stream().anyMatch(n -> n.id() == controller.id()),
                  "controller " + controller + " not among " + nodes);
            check(clusterId != null && !clusterId.isEmpty(), "clusterId " + clusterId);
        });

        step("admin.describeTopics", () -> {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            check(d.partitions().size() == PARTITIONS, "partitions " + d.partitions());
            for (TopicPartitionInfo p : d.partitions()) {
                check(p.leader() != null && p.isr().size() == 1, "partition info " + p);
            }
            check(d.topicId() != null && !d.topicId().equals(Uuid.ZERO_UUID), "topicId " + d.topicId());
        });

        step("admin.describeConfigs (topic and broker)", () -> {
            ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            String nodeId = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, nodeId);
            Map<ConfigResource, Config> cfg = admin.describeConfigs(List.of(tr, br)).all().get();
            Config t = cfg.get(tr);
            check(t.get("cleanup.policy") != null && "delete".equals(t.get("cleanup.policy").value()),
                  "topic cleanup.policy " + t.get("cleanup.policy"));
            check(t.get("retention.ms") != null, "topic config lacks retention.ms");
            check(t.entries().size() > 20, "topic config has only " + t.entries().size() + " entries");
            Config b = cfg.get(br);
            check(b.get("num.partitions") != null || b.get("log.retention.hours") != null,
                  "broker config lacks num.partitions / log.retention.hours: " + b.entries().size() + " entries");
        });

        // Consumers first, so both members own partitions before anything is produced.
        ConcurrentLinkedQueue<Seen> seen = new ConcurrentLinkedQueue<>();
        Map<String, Set<Integer>> assigned = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<?>> loops = new ArrayList<>();
        for (String name : List.of("c1", "c2")) {
            assigned.put(name, ConcurrentHashMap.newKeySet());
            loops.add(pool.submit(() -> {
                Properties cp = new Properties();
                cp.putAll(common);
                cp.put("group.id", group);
                cp.put("client.id", "kafkalite-java-" + name);
                cp.put("enable.auto.commit", "false");
                cp.put("auto.offset.reset", "earliest");
                if (assignor.equals("cooperative-sticky")) {
                    cp.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
                }
                cp.put("key.deserializer", StringDeserializer.class.getName());
                cp.put("value.deserializer", StringDeserializer.class.getName());
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                    c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                            parts.forEach(tp -> assigned.get(name).remove(tp.partition()));
                        }
                        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                            parts.forEach(tp -> assigned.get(name).add(tp.partition()));
                            System.out.println(name + " assigned " + parts + " -> " + assigned.get(name)
                                               + " (" + c.groupMetadata().generationId() + ")");
                        }
                        public void onPartitionsLost(Collection<TopicPartition> parts) {
                            fail(name + " lost partitions " + parts);
                            onPartitionsRevoked(parts);
                        }
                    });
                    while (!stop.get()) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : recs) {
                            Map<String, String> hs = new TreeMap<>();
                            for (Header h : r.headers()) hs.put(h.key(), new String(h.value()));
                            seen.add(new Seen(name, r.partition(), r.offset(), r.key(), r.value(), hs, r.timestamp()));
                        }
                        if (!recs.isEmpty()) c.commitSync(Duration.ofSeconds(15));
                    }
                } catch (Throwable e) {
                    fail(name + " consumer loop: " + e.getClass().getName() + ": " + e.getMessage());
                }
                return null;
            }));
        }

        step("group: both members assigned, disjoint, covering all 3 partitions", () -> {
            long until = System.currentTimeMillis() + 45_000;
            while (System.currentTimeMillis() < until) {
                Set<Integer> a = assigned.get("c1"), b = assigned.get("c2");
                Set<Integer> union = new TreeSet<>(a);
                union.addAll(b);
                if (!a.isEmpty() && !b.isEmpty() && union.size() == PARTITIONS && a.size() + b.size() == PARTITIONS) return;
                Thread.sleep(50);
            }
            throw new TimeoutException("no balanced assignment: " + assigned);
        });

        step("admin.describeConsumerGroups (Stable, 2 members)", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            check(d.state() == ConsumerGroupState.STABLE, "group state " + d.state());
            check(d.members().size() == 2, "members " + d.members());
            String want = assignor.equals("default") ? "range" : assignor;
            check(want.equals(d.partitionAssignor()), "assignor " + d.partitionAssignor() + ", expected " + want);
            int total = d.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum();
            check(total == PARTITIONS, "described assignment covers " + total + " partitions");
        });

        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("client.id", "kafkalite-java-producer");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        // Defaults in 3.x: enable.idempotence=true, acks=all; asserted rather than set.
        step("producer: idempotent (defaults) sends " + TOTAL + " records", () -> {
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = 0; i < TOTAL; i++) {
                    ProducerRecord<String, String> r = new ProducerRecord<>(topic, null, t0 + i * 1000L,
                        "key-" + (i % 37), "value-" + i);
                    r.headers().add("idx", String.valueOf(i).getBytes()).add("origin", "java".getBytes());
                    acks.add(producer.send(r));
                }
                producer.flush();
                for (Future<RecordMetadata> f : acks) {
                    RecordMetadata m = f.get(30, TimeUnit.SECONDS);
                    check(m.offset() >= 0, "record metadata " + m);
                }
            }
        });

        step("consume " + TOTAL + " records across the group", () -> {
            long until = System.currentTimeMillis() + 60_000;
            while (seen.size() < TOTAL && System.currentTimeMillis() < until) Thread.sleep(50);
            Thread.sleep(1500);  // lets any duplicate arrive before counting
            check(seen.size() >= TOTAL, "only " + seen.size() + " records consumed");
        });
        stop.set(true);
        for (Future<?> f : loops) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                fail("consumer thread did not end: " + e);
            }
        }
        pool.shutdownNow();

        Map<Integer, Long> ends = new TreeMap<>();
        Map<Integer, List<Seen>> byPartition = new TreeMap<>();
        step("exactly once, keys, values, headers, timestamps", () -> {
            Map<Integer, Seen> byIdx = new HashMap<>();
            Map<Integer, String> owner = new HashMap<>();
            for (Seen s : seen) {
                int idx = Integer.parseInt(s.headers().get("idx"));
                Seen before = byIdx.put(idx, s);
                if (before != null) {
                    fail("record " + idx + " delivered twice: " + before + " and " + s);
                    continue;
                }
                check(s.value().equals("value-" + idx), "record " + idx + " value " + s.value());
                check(s.key().equals("key-" + (idx % 37)), "record " + idx + " key " + s.key());
                check("java".equals(s.headers().get("origin")), "record " + idx + " headers " + s.headers());
                check(s.timestamp() == t0 + idx * 1000L, "record " + idx + " timestamp " + s.timestamp());
                String o = owner.putIfAbsent(s.partition(), s.consumer());
                check(o == null || o.equals(s.consumer()), "partition " + s.partition() + " read by both consumers");
                byPartition.computeIfAbsent(s.partition(), k -> new ArrayList<>()).add(s);
            }
            check(byIdx.size() == TOTAL, byIdx.size() + " distinct records, expected " + TOTAL);
            check(new HashSet<>(owner.values()).size() == 2, "records came from " + owner);
            for (var e : byPartition.entrySet()) {
                List<Long> offs = e.getValue().stream().map(Seen::offset).sorted().collect(Collectors.toList());
                for (int i = 0; i < offs.size(); i++) {
                    if (!check(offs.get(i) == i, "partition " + e.getKey() + " offsets not contiguous from 0: " + offs.subList(0, Math.min(10, offs.size())))) break;
                }
                ends.put(e.getKey(), (long) offs.size());
            }
        });

        step("admin.listConsumerGroupOffsets == consumed end", () -> {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (int p = 0; p < PARTITIONS; p++) {
                OffsetAndMetadata om = committed.get(new TopicPartition(topic, p));
                long want = ends.getOrDefault(p, 0L);
                check(om != null && om.offset() == want, "committed p" + p + " = " + om + ", expected " + want);
            }
        });

        step("consumer.offsetsForTimes + beginning/endOffsets", () -> {
            Properties cp = new Properties();
            cp.putAll(common);
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
                Map<TopicPartition, Long> end = c.endOffsets(tps);
                Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
                for (TopicPartition tp : tps) {
                    check(end.get(tp) == (long) ends.getOrDefault(tp.partition(), 0L), "endOffsets " + tp + " " + end.get(tp));
                    check(begin.get(tp) == 0L, "beginningOffsets " + tp + " " + begin.get(tp));
                }
                for (long q : new long[] {t0 - 1000, t0 + 500_000 + 1, t0 + 999_000, t0 + 10_000_000}) {
                    Map<TopicPartition, Long> query = new HashMap<>();
                    tps.forEach(tp -> query.put(tp, q));
                    Map<TopicPartition, OffsetAndTimestamp> got = c.offsetsForTimes(query);
                    for (TopicPartition tp : tps) {
                        Optional<Seen> first = byPartition.getOrDefault(tp.partition(), List.of()).stream()
                            .filter(s -> s.timestamp() >= q).min(Comparator.comparingLong(Seen::offset));
                        OffsetAndTimestamp ot = got.get(tp);
                        if (first.isEmpty()) {
                            check(ot == null, "offsetsForTimes(" + (q - t0) + ") " + tp + " = " + ot + ", expected null");
                        } else {
                            check(ot != null && ot.offset() == first.get().offset() && ot.timestamp() == first.get().timestamp(),
                                  "offsetsForTimes(" + (q - t0) + ") " + tp + " = " + ot + ", expected " + first.get().offset()
                                  + "@" + first.get().timestamp());
                        }
                    }
                }
            }
        });

        step("admin.listOffsets (earliest, latest, maxTimestamp)", () -> {
            for (int p = 0; p < PARTITIONS; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                long e = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
                long l = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
                ListOffsetsResult.ListOffsetsResultInfo m = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get().get(tp);
                check(e == 0 && l == ends.getOrDefault(p, 0L), "p" + p + " earliest " + e + " latest " + l);
                Seen max = byPartition.getOrDefault(p, List.of()).stream().max(Comparator.comparingLong(Seen::timestamp)).orElse(null);
                check(max != null && m.offset() == max.offset() && m.timestamp() == max.timestamp(),
                      "p" + p + " maxTimestamp " + m + ", expected " + max);
            }
        });

        step("admin.describeProducers (the idempotent producer's state)", () -> {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
            Map<TopicPartition, DescribeProducersResult.PartitionProducerState> states =
                admin.describeProducers(tps).all().get();
            Set<Long> ids = new HashSet<>();
            for (TopicPartition tp : tps) {
                List<ProducerState> active = states.get(tp).activeProducers();
                long n = ends.getOrDefault(tp.partition(), 0L);
                check(active.size() == (n > 0 ? 1 : 0), tp + " active producers " + active);
                for (ProducerState ps : active) {
                    ids.add(ps.producerId());
                    check(ps.producerId() >= 0 && ps.lastSequence() == n - 1,
                          tp + " producer state " + ps + ", expected lastSequence " + (n - 1));
                }
            }
            check(ids.size() == 1, "producer ids across partitions " + ids);
        });

        step("admin.describeConsumerGroups after close (Empty)", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            check(d.state() == ConsumerGroupState.EMPTY, "group state " + d.state());
            check(d.members().isEmpty(), "members " + d.members());
        });

        step("admin.deleteConsumerGroups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            Collection<ConsumerGroupListing> groups = admin.listConsumerGroups().all().get();
            check(groups.stream().noneMatch(g -> g.groupId().equals(group)), "group still listed: " + groups);
            Map<TopicPartition, OffsetAndMetadata> left =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            check(left.isEmpty(), "offsets left after deleting the group: " + left);
        });

        step("admin.deleteTopics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            check(!admin.listTopics().names().get().contains(topic), "topic still listed");
        });
        admin.close(Duration.ofSeconds(10));

        if (!failures.isEmpty()) {
            System.err.println("\n" + failures.size() + " check(s) failed:\n - " + String.join("\n - ", failures));
            System.exit(1);
        }
        System.out.println("ALL JAVA CHECKS PASSED");
        System.exit(0);
    }
}
