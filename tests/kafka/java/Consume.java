import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A member of consumer group GROUP reading TOPIC from the earliest offset, with the group
 * protocol PROTOCOL ({@code classic} or {@code consumer}, KIP-848), committing synchronously
 * after each poll that returned records. Prints {@code assigned P,P,...} whenever its
 * assignment changes, {@code record PARTITION OFFSET VALUE} for each record, and
 * {@code committed N} after each commit; once the file STOP exists it closes (leaving the
 * group) and prints {@code closed}.
 *
 * <p>Usage: {@code Consume BOOTSTRAP TOPIC GROUP PROTOCOL STOP}
 */
public final class Consume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        String protocol = args[3];
        Path stop = Path.of(args[4]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class.getName());
        if (!protocol.equals("classic")) {  // the key exists from Kafka 3.7 on
            props.put("group.protocol", protocol);
        } else {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        TreeSet<Integer> assigned = new TreeSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    partitions.forEach(tp -> assigned.remove(tp.partition()));
                    report(assigned);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    partitions.forEach(tp -> assigned.add(tp.partition()));
                    report(assigned);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    onPartitionsRevoked(partitions);
                }
            });
            while (!Files.exists(stop)) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    System.out.println("record " + r.partition() + " " + r.offset() + " "
                            + r.value());
                }
                if (!records.isEmpty()) {
                    consumer.commitSync();
                    System.out.println("committed " + records.count());
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
        System.out.flush();
    }

    private static void report(TreeSet<Integer> assigned) {
        StringBuilder line = new StringBuilder("assigned ");
        String sep = "";
        for (int p : assigned) {
            line.append(sep).append(p);
            sep = ",";
        }
        System.out.println(line);
        System.out.flush();
    }
}
