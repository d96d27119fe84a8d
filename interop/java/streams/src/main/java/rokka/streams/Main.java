package rokka.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count under exactly_once_v2, driven by interop/test_kafka_streams.py.
 *
 * <p>Usage: {@code java -jar streams-interop.jar <bootstrap> <application.id> <input> <output> <state dir>
 * <instance id>}. Topology: lines from {@code input} (String values) are split into words, re-keyed by
 * word (so the records go through a repartition topic), grouped and counted in a persistent key-value
 * store ({@code counts}, whose changelog topic is compacted) with its cache off, so every input word
 * gives one output record (word -> running count, Long) in {@code output}. Events on stdout, one JSON
 * object a line: {@code {"event":"state","state":...}}, {@code {"event":"error",...}},
 * {@code {"event":"closed"}}. Closing stdin (or a line "stop") closes the application cleanly.
 */
public final class Main {
    private Main() {
    }

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : String.valueOf(s).toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static String version() {
        try (java.io.InputStream in = KafkaStreams.class.getResourceAsStream("/kafka/kafka-streams-version.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .selectKey((key, word) -> word)
                .groupByKey(Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Properties config(String bootstrap, String appId, String stateDir, String instance) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // static membership: a restarted instance takes its place back at once, without waiting for
        // the killed one's session to time out
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instance);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), 120000);
        p.put(StreamsConfig.RETRY_BACKOFF_MS_CONFIG, 200);
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);   // DeleteRecords on the repartition topic
        return p;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("version")) {
            System.out.println(version());
            return;
        }
        if (args.length != 6) {
            System.err.println("usage: <bootstrap> <application.id> <input> <output> <state dir> <instance id>");
            System.exit(2);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]),
                config(args[0], args[1], args[4], args[5]));
        streams.setStateListener((now, before) -> emit("{\"event\":\"state\",\"state\":" + quote(now.name())
                + ",\"before\":" + quote(before.name()) + "}"));
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"error\",\"error\":" + quote(String.valueOf(e)) + "}");
            e.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        emit("{\"event\":\"ready\",\"kafka_streams\":" + quote(version()) + "}");
        streams.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // nothing else is understood: the application runs until told to stop
        }
        boolean closed = streams.close(Duration.ofSeconds(30));
        emit("{\"event\":\"closed\",\"clean\":" + closed + "}");
        System.exit(0);
    }
}
