import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count: lines of INPUT split into words, regrouped by word (a repartition
 * topic, {@code APP-words-repartition}), counted in a state store backed by a compacted
 * changelog ({@code APP-counts-changelog}), each new count written to OUTPUT (word -> count as
 * a long). At-least-once. Prints {@code state NEW_STATE} on each state change and
 * {@code uncaught ERROR} for an exception that ends a stream thread (replaced, unless the
 * cluster lacks an API version the application needs: then the application stops, in state
 * ERROR); stops (closing the application cleanly) when its standard input closes, then prints
 * {@code closed CLOSED_IN_TIME STATE} and exits, with status 1 if it went into ERROR.
 *
 * <p>Usage: {@code WordCount BOOTSTRAP APP INPUT OUTPUT STATE_DIR REPLICATION [KEY=VALUE ...]},
 * the settings after the sixth argument going to the application's configuration last.
 */
public final class WordCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, args[5]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.producerPrefix("acks"), "all");
        for (int i = 6; i < args.length; i++) {
            String[] setting = args[i].split("=", 2);
            props.put(setting[0], setting[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.as("words"))
                .count(Materialized.as("counts"))
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean();
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed.set(true);
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("uncaught " + error);
            System.out.flush();
            // a broker that lacks what the application asks for will not grow it: give up
            return unsupported(error) ? StreamThreadExceptionResponse.SHUTDOWN_CLIENT
                    : StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // until the test closes our standard input
                }
            } catch (java.io.IOException ignored) {
                // closed
            }
            stopped.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        stopped.await();
        boolean closed = streams.close(Duration.ofSeconds(60));
        // the listener may not have printed the last state yet: say it here
        System.out.println("closed " + closed + " " + streams.state());
        System.out.flush();
        System.exit(failed.get() ? 1 : 0);
    }

    private static boolean unsupported(Throwable error) {
        for (Throwable e = error; e != null; e = e.getCause()) {
            if (e instanceof UnsupportedVersionException) {
                return true;
            }
        }
        return false;
    }
}
