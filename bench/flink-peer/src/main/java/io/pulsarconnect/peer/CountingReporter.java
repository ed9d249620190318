package io.pulsarconnect.peer;

import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Pattern;

/**
 * In-process metric reporter: keeps live references to the {@code numRecordsIn} counters of sink operators
 * (operator name starting with "Sink" or containing "Writer", Flink's names for table sinks and Sink V2 writers),
 * so the runner can read Flink's own count of rows that reached the sink without touching the job's SQL.
 * Works because the MiniCluster runs in this JVM.
 */
public final class CountingReporter implements MetricReporter {

    private static final Pattern SINK = Pattern.compile("(?i)^sink\\b.*|.*\\bwriter\\b.*");
    private static final List<Counter> SINK_IN = new CopyOnWriteArrayList<>();
    private static final List<String> NAMES = new CopyOnWriteArrayList<>();

    public static long sinkRecordsIn() {
        long n = 0;
        for (Counter c : SINK_IN) n += c.getCount();
        return n;
    }

    public static List<String> sinkOperatorNames() {
        return new ArrayList<>(new TreeSet<>(NAMES));
    }

    @Override
    public void open(MetricConfig config) {}

    @Override
    public void close() {}

    @Override
    public void notifyOfAddedMetric(Metric metric, String metricName, MetricGroup group) {
        if (!"numRecordsIn".equals(metricName) || !(metric instanceof Counter)) return;
        Map<String, String> vars = group.getAllVariables();
        String op = vars.get("<operator_name>");
        if (op == null) return; // task-level counter: would double count
        if (SINK.matcher(op).matches() && !op.toLowerCase().contains("committer")) {
            SINK_IN.add((Counter) metric);
            NAMES.add(op);
            System.err.println("[flink-peer] counting rows at operator: " + op + " (subtask " + vars.get("<subtask_index>") + ")");
        }
    }

    @Override
    public void notifyOfRemovedMetric(Metric metric, String metricName, MetricGroup group) {
        // keep the counter: its final value still counts after the task ends
    }

    /** Registered in META-INF/services and named by metrics.reporter.peer.factory.class. */
    public static final class Factory implements MetricReporterFactory {
        @Override
        public MetricReporter createMetricReporter(Properties properties) {
            return new CountingReporter();
        }
    }
}
