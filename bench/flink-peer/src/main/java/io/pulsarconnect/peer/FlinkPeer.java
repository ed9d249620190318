package io.pulsarconnect.peer;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Flink side of pulsar-connect's benchmarks: runs the SQL statements of a file (SET, CREATE TABLE, INSERT INTO)
 * in a local MiniCluster (streaming mode), counts the rows reaching the sink operators through Flink's own
 * {@code numRecordsIn} operator metric (an in-process metric reporter, see {@link CountingReporter}), stops when
 * {@code --expect N} rows have arrived (or the job finishes), and reports rows/s, CPU, peak RSS and heap as JSON.
 *
 * <pre>
 * java -Xmx512m -jar flink-peer.jar --sql jobs/pulsar-json-blackhole.sql --service-url pulsar://127.0.0.1:6650 \
 *      --admin-url http://127.0.0.1:8080 --topic persistent://public/default/orders --expect 200000 --report r.json
 * </pre>
 */
public final class FlinkPeer {

    public static void main(String[] args) throws Exception {
        long processStartMs = ManagementFactory.getRuntimeMXBean().getStartTime();
        Map<String, String> vars = new LinkedHashMap<>();
        String sqlFile = null, report = null, stopFile = null;
        int parallelism = 1;
        long expect = -1;
        double timeoutS = 600;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--sql": sqlFile = args[++i]; break;
                case "--parallelism": parallelism = Integer.parseInt(args[++i]); break;
                case "--expect": expect = Long.parseLong(args[++i]); break;
                case "--report": report = args[++i]; break;
                case "--timeout": timeoutS = Double.parseDouble(args[++i]); break;
                case "--stop-file": stopFile = args[++i]; break;
                case "--service-url": vars.put("SERVICE_URL", args[++i]); break;
                case "--admin-url": vars.put("ADMIN_URL", args[++i]); break;
                case "--topic": vars.put("TOPIC", args[++i]); break;
                case "--var": {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq < 1) usage("--var needs NAME=VALUE");
                    vars.put(kv.substring(0, eq), kv.substring(eq + 1));
                    break;
                }
                case "-h": case "--help": usage(null); break;
                default: usage("unknown argument " + a);
            }
        }
        if (sqlFile == null) usage("--sql is required");
        // ${RUN_ID}: unique per run (e.g. for a fresh subscription name), unless given with --var RUN_ID=...
        vars.putIfAbsent("RUN_ID", Long.toString(System.currentTimeMillis(), 36) + "-" + ProcessHandle.current().pid());

        // comments are dropped first, so placeholders named in comments need no value
        List<String> statements = new ArrayList<>();
        for (String s : splitStatements(Files.readString(Paths.get(sqlFile), StandardCharsets.UTF_8))) statements.add(substitute(s, vars));

        // SET statements go into the environment's configuration before anything is created
        Configuration conf = new Configuration();
        conf.setString("metrics.reporter.peer.factory.class", CountingReporter.Factory.class.getName());
        conf.setString("metrics.reporter.peer.interval", "1 s");
        conf.setString("rest.bind-port", "0"); // no fixed web port
        conf.setString("taskmanager.memory.network.min", "64m");
        conf.setString("taskmanager.memory.network.max", "64m");
        conf.setString("taskmanager.memory.managed.size", "64m");
        // a benchmark run must end on the first failure (Flink's default with checkpointing is to restart forever);
        // a SET 'restart-strategy.type' in the SQL file overrides this
        conf.setString("restart-strategy.type", "none");
        // checkpoints to a temp dir: the JobManager heap storage caps state at 5 MB, which datagen's sequence
        // generator exceeds at 1M rows ("Size of the state is larger than the maximum permitted memory-backed state")
        Path checkpoints = Files.createTempDirectory("flink-peer-checkpoints-");
        conf.setString("state.checkpoint-storage", "filesystem");
        conf.setString("state.checkpoints.dir", checkpoints.toUri().toString());
        conf.setString("taskmanager.numberOfTaskSlots", Integer.toString(Math.max(1, parallelism)));
        List<String> rest = new ArrayList<>();
        Pattern set = Pattern.compile("(?is)^SET\\s+'([^']*)'\\s*=\\s*'((?:[^']|'')*)'$");
        for (String s : statements) {
            Matcher m = set.matcher(s);
            if (m.matches()) {
                conf.setString(m.group(1), m.group(2).replace("''", "'"));
                log("SET " + m.group(1) + " = " + m.group(2));
            } else {
                rest.add(s);
            }
        }

        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env, EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        StatementSet inserts = tEnv.createStatementSet();
        int nInserts = 0;
        for (String s : rest) {
            if (s.toUpperCase(Locale.ROOT).startsWith("INSERT")) {
                inserts.addInsertSql(s);
                nInserts++;
            } else {
                log("exec: " + firstLine(s));
                tEnv.executeSql(s);
            }
        }
        if (nInserts == 0) usage("the SQL file has no INSERT statement");

        MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
        long submitNs = System.nanoTime();
        double cpuAtSubmit = cpuSeconds();
        TableResult result = inserts.execute();
        JobClient job = result.getJobClient().orElseThrow();
        log("submitted job " + job.getJobID() + (expect > 0 ? ", waiting for " + expect + " rows at the sink" : ", waiting for the job to finish"));

        long firstRowNs = -1, lastProgressNs = System.nanoTime(), lastCount = 0, lastLogNs = System.nanoTime();
        double cpuAtFirstRow = Double.NaN;
        String outcome;
        String failure = null;
        long peakHeap = 0;
        while (true) {
            long now = System.nanoTime();
            long count = CountingReporter.sinkRecordsIn();
            if (count > 0 && firstRowNs < 0) {
                firstRowNs = now;
                cpuAtFirstRow = cpuSeconds();
            }
            if (count != lastCount) {
                lastCount = count;
                lastProgressNs = now;
            }
            peakHeap = Math.max(peakHeap, mem.getHeapMemoryUsage().getUsed());
            if (expect > 0 && count >= expect) {
                outcome = "expected-rows";
                break;
            }
            JobStatus st;
            try {
                st = job.getJobStatus().get();
            } catch (Exception e) {
                st = null; // the per-job MiniCluster shuts down as soon as a bounded job ends
            }
            if (st == null || st.isGloballyTerminalState()) {
                try {
                    job.getJobExecutionResult().get(30, java.util.concurrent.TimeUnit.SECONDS);
                    outcome = "job-finished";
                } catch (Exception e) {
                    outcome = "job-failed";
                    Throwable c = e;
                    while (c.getCause() != null) c = c.getCause();
                    failure = c.getClass().getName() + ": " + c.getMessage();
                }
                break;
            }
            if ((now - submitNs) / 1e9 > timeoutS) {
                outcome = "timeout";
                break;
            }
            if (stopFile != null && Files.exists(Paths.get(stopFile))) {
                outcome = "stopped";
                break;
            }
            if ((now - lastLogNs) / 1e9 >= 5) {
                lastLogNs = now;
                log(String.format(Locale.ROOT, "%d rows at the sink after %.1f s", count, (now - submitNs) / 1e9));
            }
            Thread.sleep(20);
        }
        long endNs = System.nanoTime();
        double cpuAtEnd = cpuSeconds();
        long rows = CountingReporter.sinkRecordsIn();
        long heapUsed = mem.getHeapMemoryUsage().getUsed();
        peakHeap = Math.max(peakHeap, heapUsed);
        Map<String, Long> rssKb = procStatus();

        if (outcome.equals("expected-rows") || outcome.equals("timeout") || outcome.equals("stopped")) {
            try {
                job.cancel().get();
            } catch (Exception e) {
                log("cancel: " + e);
            }
        }

        double wallSubmit = (endNs - submitNs) / 1e9;
        double wallSteady = firstRowNs < 0 ? Double.NaN : (endNs - firstRowNs) / 1e9;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("engine", "flink-1.18.1+flink-connector-pulsar-4.1.0-1.18");
        r.put("sql_file", sqlFile);
        r.put("run_id", vars.get("RUN_ID"));
        r.put("parallelism", parallelism);
        r.put("outcome", outcome);
        if (failure != null) r.put("failure", failure);
        r.put("rows", rows);
        r.put("expected_rows", expect);
        r.put("wall_seconds", round(wallSubmit));
        r.put("rows_per_second", round(rows / wallSubmit));
        r.put("wall_seconds_from_first_row", round(wallSteady));
        r.put("rows_per_second_from_first_row", round(rows / wallSteady));
        r.put("startup_seconds", round(firstRowNs > 0 ? (firstRowNs - submitNs) / 1e9 : Double.NaN));
        r.put("process_seconds", round((System.currentTimeMillis() - processStartMs) / 1e3));
        r.put("cpu_seconds", round(cpuAtEnd - cpuAtSubmit));
        r.put("cpu_seconds_from_first_row", round(cpuAtEnd - cpuAtFirstRow));
        r.put("cpu_seconds_process", round(cpuAtEnd));
        r.put("cpu_seconds_per_million_rows", round((cpuAtEnd - cpuAtSubmit) / rows * 1e6));
        r.put("cpu_seconds_per_million_rows_from_first_row", round((cpuAtEnd - cpuAtFirstRow) / rows * 1e6));
        r.put("peak_rss_mb", round(rssKb.getOrDefault("VmHWM", -1L) / 1024.0));
        r.put("rss_mb_at_end", round(rssKb.getOrDefault("VmRSS", -1L) / 1024.0));
        r.put("heap_used_mb_at_end", round(heapUsed / 1048576.0));
        r.put("heap_used_mb_peak_sampled", round(peakHeap / 1048576.0));
        r.put("heap_max_mb", round(mem.getHeapMemoryUsage().getMax() / 1048576.0));
        r.put("sink_operators", CountingReporter.sinkOperatorNames());
        r.put("available_processors", Runtime.getRuntime().availableProcessors());
        r.put("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
        String json = toJson(r);
        System.out.println(json);
        if (report != null) {
            Path p = Paths.get(report);
            if (p.getParent() != null) Files.createDirectories(p.getParent());
            Files.writeString(p, json + "\n", StandardCharsets.UTF_8);
        }
        deleteTree(checkpoints);
        // the MiniCluster and Pulsar client threads are not daemons: leave decisively
        System.out.flush();
        Runtime.getRuntime().halt(outcome.equals("expected-rows") || outcome.equals("job-finished") || outcome.equals("stopped") ? 0 : 1);
    }

    // ------------------------------------------------------------------ helpers

    /** ${NAME} and ${NAME:-default}; a default may itself hold ${OTHER} (resolved innermost first). */
    static String substitute(String sql, Map<String, String> vars) {
        Pattern p = Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}$]*))?}");
        for (int pass = 0; pass < 8; pass++) {
            Matcher m = p.matcher(sql);
            StringBuilder sb = new StringBuilder();
            boolean any = false;
            while (m.find()) {
                any = true;
                String v = vars.get(m.group(1));
                if (v == null) v = System.getenv(m.group(1));
                if (v == null) v = m.group(2); // ${NAME:-default}
                if (v == null) usage("placeholder ${" + m.group(1) + "} has no value (use --var " + m.group(1) + "=... or the matching flag)");
                m.appendReplacement(sb, Matcher.quoteReplacement(v));
            }
            m.appendTail(sb);
            sql = sb.toString();
            if (!any) break;
        }
        return sql;
    }

    /** Split on ';' outside quotes and comments; drop comments and empty statements. */
    static List<String> splitStatements(String sql) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        int n = sql.length();
        for (int i = 0; i < n; i++) {
            char c = sql.charAt(i);
            if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
                while (i < n && sql.charAt(i) != '\n') i++;
                cur.append('\n');
            } else if (c == '\'' || c == '`' || c == '"') {
                int j = i + 1;
                while (j < n) {
                    if (sql.charAt(j) == c) {
                        if (c == '\'' && j + 1 < n && sql.charAt(j + 1) == '\'') { j += 2; continue; }
                        break;
                    }
                    j++;
                }
                cur.append(sql, i, Math.min(j + 1, n));
                i = j;
            } else if (c == ';') {
                String s = cur.toString().trim();
                if (!s.isEmpty()) out.add(s);
                cur.setLength(0);
            } else {
                cur.append(c);
            }
        }
        String s = cur.toString().trim();
        if (!s.isEmpty()) out.add(s);
        return out;
    }

    static void deleteTree(Path root) {
        try (java.util.stream.Stream<Path> walk = Files.walk(root)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (Exception e) {
            // best effort
        }
    }

    static double cpuSeconds() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return Double.NaN;
    }

    static Map<String, Long> procStatus() {
        Map<String, Long> m = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:") || line.startsWith("VmRSS:")) {
                    m.put(line.substring(0, line.indexOf(':')), Long.parseLong(line.replaceAll("[^0-9]", "")));
                }
            }
        } catch (Exception e) {
            // not Linux
        }
        return m;
    }

    static Object round(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) return null;
        return Math.round(d * 1000.0) / 1000.0;
    }

    static String toJson(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder("{\n");
        int i = 0;
        for (Map.Entry<String, Object> e : m.entrySet()) {
            sb.append("  \"").append(e.getKey()).append("\": ").append(jsonValue(e.getValue()));
            sb.append(++i < m.size() ? ",\n" : "\n");
        }
        return sb.append("}").toString();
    }

    static String jsonValue(Object v) {
        if (v == null) return "null";
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof List) {
            List<String> parts = new ArrayList<>();
            for (Object o : (List<?>) v) parts.add(jsonValue(o));
            return "[" + String.join(", ", parts) + "]";
        }
        String s = v.toString();
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }

    static String firstLine(String s) {
        String l = s.strip().split("\n", 2)[0];
        return l.length() > 100 ? l.substring(0, 100) + "…" : l;
    }

    static void log(String s) {
        System.err.println("[flink-peer] " + s);
    }

    static void usage(String err) {
        if (err != null) System.err.println("error: " + err);
        System.err.println("usage: java -jar flink-peer.jar --sql FILE [--parallelism N] [--expect ROWS] [--report FILE.json]\n"
                + "         [--timeout SECONDS] [--stop-file PATH] [--service-url URL] [--admin-url URL] [--topic TOPIC] [--var NAME=VALUE]...\n"
                + "  ${SERVICE_URL} ${ADMIN_URL} ${TOPIC} and ${NAME} / ${NAME:-default} placeholders in FILE are replaced\n"
                + "  (flags and --var first, then environment variables, then the default).");
        System.exit(err == null ? 0 : 2);
    }
}
