// The Java client's transactions (kafka-clients 3.8.0) against a broker:
//   TxnCheck BOOTSTRAP TOPIC OFFSETS_TOPIC GROUP
// commit and abort; read_committed sees only committed records, in order; read_uncommitted
// sees all; a second producer with the same transactional.id fences the first;
// sendOffsetsToTransaction makes the group's offset visible at commit only. Prints every
// mismatch and exits 1, else prints "ALL JAVA TXN CHECKS PASSED".
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.*;

public class TxnCheck {
    static final List<String> failures = new ArrayList<>();

    static void check(boolean ok, String what) {
        if (!ok) failures.add(what);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("max.block.ms", "20000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static List<String> read(String bootstrap, String topic, String isolation, long end) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", isolation);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20000;
            while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r.value());
                }
            }
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], input = args[2], group = args[3];
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaProducer<String, String> p1 = producer(bootstrap, "java-txn-" + topic);
        p1.initTransactions();
        String[][] txns = {{"a0", "a1", "a2"}, {"b0", "b1", "b2"}, {"c0", "c1", "c2"}};
        for (int i = 0; i < txns.length; i++) {
            p1.beginTransaction();
            for (String v : txns[i]) p1.send(new ProducerRecord<>(topic, 0, null, v));
            p1.flush();
            if (i == 1) p1.abortTransaction(); else p1.commitTransaction();
        }
        // 9 records and 3 markers: read up to offset 12 both ways.
        List<String> committed = read(bootstrap, topic, "read_committed", 12);
        check(committed.equals(List.of("a0", "a1", "a2", "c0", "c1", "c2")),
              "read_committed saw " + committed);
        List<String> all = read(bootstrap, topic, "read_uncommitted", 12);
        check(all.equals(List.of("a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2")),
              "read_uncommitted saw " + all);

        // sendOffsetsToTransaction: visible after commit, not after abort.
        TopicPartition in = new TopicPartition(input, 0);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            for (long[] step : new long[][]{{3, 1}, {7, 0}}) {
                p1.beginTransaction();
                p1.send(new ProducerRecord<>(topic, 0, null, "o" + step[0]));
                p1.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(step[0], "m")),
                                            new ConsumerGroupMetadata(group));
                if (step[1] == 1) p1.commitTransaction(); else p1.abortTransaction();
            }
            OffsetAndMetadata got = c.committed(Set.of(in), Duration.ofSeconds(20)).get(in);
            check(got != null && got.offset() == 3 && got.metadata().equals("m"),
                  "committed offset after commit(3) and abort(7): " + got);
        }

        // Fencing: a second producer with the same transactional.id fences the first.
        KafkaProducer<String, String> p2 = producer(bootstrap, "java-txn-" + topic);
        p2.initTransactions();
        boolean fenced = false;
        try {
            p1.beginTransaction();
            p1.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
            p1.commitTransaction();
        } catch (ProducerFencedException e) {
            fenced = true;
        } catch (Exception e) {
            Throwable t = e;
            while (t != null && !(t instanceof ProducerFencedException)) t = t.getCause();
            fenced = t != null;
            if (!fenced) failures.add("the fenced producer failed with " + e);
        }
        check(fenced, "the older producer was not fenced");
        p1.close(Duration.ofSeconds(5));
        p2.close(Duration.ofSeconds(5));
        if (!failures.isEmpty()) {
            failures.forEach(System.out::println);
            System.exit(1);
        }
        System.out.println("ALL JAVA TXN CHECKS PASSED");
    }
}
