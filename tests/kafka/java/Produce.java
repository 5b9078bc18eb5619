import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An idempotent producer (acks=all) writing COUNT numbered records, PREFIX-0 .. PREFIX-(COUNT-1),
 * keyed by their number, to TOPIC. Prints one line per acknowledged record,
 * {@code acked PARTITION OFFSET VALUE}, one per failed record, {@code failed VALUE ERROR}, and
 * {@code done ACKED FAILED} at the end; exits 0 only when every record was acknowledged.
 *
 * <p>Usage: {@code Produce BOOTSTRAP TOPIC COUNT PREFIX}
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String prefix = args[3];
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                String value = prefix + "-" + i;
                producer.send(new ProducerRecord<>(topic, Integer.toString(i), value),
                        (metadata, error) -> {
                            if (error != null) {
                                failed.incrementAndGet();
                                System.out.println("failed " + value + " " + error);
                            } else {
                                acked.incrementAndGet();
                                System.out.println("acked " + metadata.partition() + " "
                                        + metadata.offset() + " " + value);
                            }
                        });
            }
            producer.flush();
        }
        System.out.println("done " + acked.get() + " " + failed.get());
        System.out.flush();
        System.exit(acked.get() == count ? 0 : 1);
    }
}
