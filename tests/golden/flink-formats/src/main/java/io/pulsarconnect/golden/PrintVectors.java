package io.pulsarconnect.golden;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.conversion.DataStructureConverter;
import org.apache.flink.table.data.conversion.DataStructureConverters;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.types.Row;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static io.pulsarconnect.golden.Values.F;

/**
 * vectors/print: what Flink 1.18.1's {@code print} connector writes for the all-types table, for FLOAT/DOUBLE edge
 * values and for the identifier prefix. Every file comes from a real {@code INSERT INTO <print table> SELECT * FROM
 * <rows>} in a local StreamTableEnvironment (planner + MiniCluster, parallelism 1), its standard output captured as
 * UTF-8. The per-row lines are the print function's own conversion ({@code DataStructureConverters} to {@code Row},
 * then {@code Row.toString()}), and the generator fails unless their concatenation is byte-for-byte what the sink
 * printed.
 */
final class PrintVectors {
    private PrintVectors() {}

    static void write(GenerateGoldenVectors.Context c) throws Exception {
        // Double.toString/Float.toString changed in JDK 19 (JDK-4511638: shortest digits); Flink 1.18 runs on 8/11/17,
        // which share the older FloatingDecimal algorithm that these vectors pin down.
        if (Runtime.version().feature() >= 19) {
            throw new IllegalStateException("run the generator with Java 17 (this is Java " + Runtime.version() + ")");
        }
        allTypes(c);
        floats();
        identifiers();
        numberText();
    }

    // ------------------------------------------------------------------ all-types

    static void allTypes(GenerateGoldenVectors.Context c) throws Exception {
        RowType type = c.all.rowType();
        List<RowData> rows = new ArrayList<>();
        for (JsonNode r : c.rows) rows.add(Values.toRow(r, type));
        Printed p = printJob(c.all, rows, GenerateGoldenVectors.opts());

        ObjectNode doc = header(GenerateGoldenVectors.opts());
        doc.put("table", c.all.name);
        doc.set("columns", c.all.columnsJson());
        ArrayNode vs = doc.putArray("lines");
        for (int i = 0; i < rows.size(); i++) {
            ObjectNode v = vs.addObject().put("row", i).put("name", c.rowNames.get(i)).put("line", p.lines.get(i));
            ArrayNode fs = v.putArray("fields");
            p.fields.get(i).forEach(fs::add);
        }
        GenerateGoldenVectors.write("print/all-types.json", doc);
    }

    // ------------------------------------------------------------------ FLOAT / DOUBLE edge values

    static void floats() throws Exception {
        GenerateGoldenVectors.Table t = new GenerateGoldenVectors.Table("floats").col("name", "STRING").col("f", "FLOAT").col("d", "DOUBLE");
        List<Object[]> values = new ArrayList<>();
        fd(values, "one-tenth", 0.1f, 0.1);
        fd(values, "ten-million", 1.0E7f, 1.0E7);
        fd(values, "below-ten-million", 9999999.0f, 9999999.0);
        fd(values, "next-below-ten-million", Math.nextDown(1.0E7f), Math.nextDown(1.0E7));
        fd(values, "max", Float.MAX_VALUE, Double.MAX_VALUE);
        fd(values, "min-subnormal", Float.MIN_VALUE, Double.MIN_VALUE);
        fd(values, "min-normal", Float.MIN_NORMAL, Double.MIN_NORMAL);
        fd(values, "one-thousandth", 0.001f, 0.001);
        fd(values, "below-one-thousandth", 9.99E-4f, 9.99E-4);
        fd(values, "next-below-one-thousandth", Math.nextDown(0.001f), Math.nextDown(0.001));
        fd(values, "negative-zero", -0.0f, -0.0);
        fd(values, "zero", 0.0f, 0.0);
        fd(values, "hundred", 100.0f, 100.0);
        fd(values, "1.23456789E8", 1.23456789E8f, 1.23456789E8);
        fd(values, "nan", Float.NaN, Double.NaN);
        fd(values, "positive-infinity", Float.POSITIVE_INFINITY, Double.POSITIVE_INFINITY);
        fd(values, "negative-infinity", Float.NEGATIVE_INFINITY, Double.NEGATIVE_INFINITY);
        fd(values, "one-third", 1.0f / 3, 1.0 / 3);
        fd(values, "minus-two-thirds", -2.0f / 3, -2.0 / 3);
        fd(values, "0.002", 0.002f, 0.002);
        fd(values, "1.0E23", 1.0E23f, 1.0E23);
        fd(values, "2^24-and-2^53+2", 16777216f, 9007199254740994.0);
        fd(values, "long-max", (float) Long.MAX_VALUE, (double) Long.MAX_VALUE);
        fd(values, "123456.7", 123456.7f, 123456.7);
        fd(values, "1.0E-5", 1.0E-5f, 1.0E-5);
        fd(values, "4.35", 4.35f, 4.35);
        fd(values, "2.82879384806159E17", 2.82879384806159E17f, 2.82879384806159E17);
        fd(values, "1.0E-44", 1.0E-44f, 1.0E-320);
        fd(values, "float-0.1-widened", 0.3f, (double) 0.1f);
        fd(values, "5.0E-324-times-3", 2.0E-45f, 1.5E-323);
        fd(values, "powers-of-two", 1024f, 1.4411518807585587E17);
        fd(values, "9.999999E-4", 9.999999E-4f, 9.99999999999E-4);
        fd(values, "negative-1.0E7", -1.0E7f, -1.0E7);
        List<RowData> rows = new ArrayList<>();
        for (Object[] v : values) rows.add(GenericRowData.of(StringData.fromString((String) v[0]), v[1], v[2]));
        List<String> lines = printJob(t, rows, GenerateGoldenVectors.opts()).lines;

        ObjectNode doc = header(GenerateGoldenVectors.opts());
        doc.set("columns", t.columnsJson());
        ArrayNode vs = doc.putArray("lines");
        for (int i = 0; i < rows.size(); i++) {
            Object[] v = values.get(i);
            vs.addObject().put("name", (String) v[0])
                    .put("float_bits", String.format("%08x", Float.floatToRawIntBits((Float) v[1])))
                    .put("double_bits", String.format("%016x", Double.doubleToRawLongBits((Double) v[2])))
                    .put("line", lines.get(i));
        }
        GenerateGoldenVectors.write("print/floats.json", doc);
    }

    static void fd(List<Object[]> values, String name, float f, double d) {
        values.add(new Object[] {name, f, d});
    }

    // ------------------------------------------------------------------ print-identifier prefix

    static void identifiers() throws Exception {
        GenerateGoldenVectors.Table t = new GenerateGoldenVectors.Table("identifier").col("id", "INT").col("s", "STRING");
        List<RowData> rows = List.of(GenericRowData.of(1, StringData.fromString("x")), GenericRowData.of(2, null));
        ObjectNode doc = header(GenerateGoldenVectors.opts());
        doc.remove("options");
        doc.set("columns", t.columnsJson());
        ArrayNode cases = doc.putArray("cases");
        for (Map<String, String> o : List.of(GenerateGoldenVectors.opts(),
                GenerateGoldenVectors.opts("print-identifier", "golden"),
                GenerateGoldenVectors.opts("print-identifier", ""),
                GenerateGoldenVectors.opts("print-identifier", "my sink:1"))) {
            ObjectNode cs = cases.addObject();
            ObjectNode opts = cs.putObject("options");
            o.forEach(opts::put);
            cs.put("output", printJob(t, rows, o).printed);
        }
        GenerateGoldenVectors.write("print/identifier.json", doc);
    }

    // ------------------------------------------------------------------ Float.toString / Double.toString samples

    /**
     * Java 17's {@code Float.toString} / {@code Double.toString} (what {@code Row.toString} prints for FLOAT/DOUBLE)
     * for a fixed pseudo-random sample (SplittableRandom is specified, so the sample is the same on every JVM):
     * random bit patterns, short decimals, powers of ten and two. One line per value: {@code f|d <hex bits> <text>}.
     */
    static void numberText() throws Exception {
        SplittableRandom r = new SplittableRandom(20261201L);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 1500; i++) d(sb, Double.longBitsToDouble(r.nextLong()));
        for (int i = 0; i < 1500; i++) f(sb, Float.intBitsToFloat(r.nextInt()));
        for (int i = 0; i < 1500; i++) d(sb, Double.parseDouble(shortDecimal(r, 17, 30)));
        for (int i = 0; i < 1500; i++) f(sb, Float.parseFloat(shortDecimal(r, 9, 12)));
        for (int e = -325; e <= 309; e++) d(sb, Double.parseDouble("1e" + e));
        for (int e = -46; e <= 39; e++) f(sb, Float.parseFloat("1e" + e));
        for (int e = -1074; e <= 1023; e += 7) d(sb, Math.scalb(1.0, e));
        for (int e = -149; e <= 127; e += 3) f(sb, Math.scalb(1.0f, e));
        Path p = GenerateGoldenVectors.out.resolve("print/float-to-string.txt");
        Files.createDirectories(p.getParent());
        Files.write(p, sb.toString().getBytes(StandardCharsets.UTF_8));
        GenerateGoldenVectors.files++;
    }

    static String shortDecimal(SplittableRandom r, int maxDigits, int maxExp) {
        int n = 1 + r.nextInt(maxDigits);
        StringBuilder s = new StringBuilder();
        if (r.nextBoolean()) s.append('-');
        for (int i = 0; i < n; i++) s.append((char) ('0' + (i == 0 ? 1 + r.nextInt(9) : r.nextInt(10))));
        return s.append('e').append(r.nextInt(2 * maxExp + 1) - maxExp).toString();
    }

    static void d(StringBuilder sb, double v) {
        sb.append("d ").append(String.format("%016x", Double.doubleToRawLongBits(v))).append(' ').append(Double.toString(v)).append('\n');
    }

    static void f(StringBuilder sb, float v) {
        sb.append("f ").append(String.format("%08x", Float.floatToRawIntBits(v))).append(' ').append(Float.toString(v)).append('\n');
    }

    // ------------------------------------------------------------------ running the print connector

    /** What the print sink wrote to stdout, and the line of each row (without the identifier prefix). */
    static final class Printed {
        final String printed;
        final List<String> lines;
        /** Per row, the text of each field inside the line (Row.of(field).toString() without "+I[" and "]"). */
        final List<List<String>> fields;
        Printed(String printed, List<String> lines, List<List<String>> fields) { this.printed = printed; this.lines = lines; this.fields = fields; }
    }

    /**
     * INSERT INTO a print table SELECT * FROM the rows, in a local StreamTableEnvironment. The line of each row is the
     * print function's conversion (internal RowData -> external Row with the sink's physical row data type, exactly
     * what PrintTableSinkFactory hands to createDataStructureConverter -> Row.toString()); the run fails unless the
     * sink printed exactly those lines, in order.
     */
    static Printed printJob(GenerateGoldenVectors.Table t, List<RowData> rows, Map<String, String> options) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env, EnvironmentSettings.inStreamingMode());
        tEnv.getConfig().setLocalTimeZone(ZoneOffset.UTC);
        DataStream<RowData> ds = env.fromCollection(rows, InternalTypeInfo.of(t.rowType()));
        tEnv.createTemporaryView("src", ds);
        StringBuilder ddl = new StringBuilder("CREATE TABLE sink (");
        for (int i = 0; i < t.names.size(); i++) {
            if (i > 0) ddl.append(", ");
            ddl.append('`').append(t.names.get(i)).append("` ").append(t.types.get(i));
        }
        ddl.append(") WITH ('connector' = 'print'");
        options.forEach((k, v) -> ddl.append(", '").append(k).append("' = '").append(v.replace("'", "''")).append('\''));
        tEnv.executeSql(ddl.append(')').toString());
        DataType physical = tEnv.from("sink").getResolvedSchema().toPhysicalRowDataType();
        DataStructureConverter<Object, Object> conv = DataStructureConverters.getConverter(physical);
        conv.open(Flink.CL);
        List<String> lines = new ArrayList<>();
        // the rows reach the sink as BinaryRowData (serialized between operators), as here
        RowDataSerializer ser = new RowDataSerializer(t.rowType());
        List<List<String>> fields = new ArrayList<>();
        for (RowData row : rows) {
            Row external = (Row) conv.toExternal(ser.toBinaryRow(row).copy());
            lines.add(external.toString());
            List<String> fs = new ArrayList<>();
            for (int i = 0; i < external.getArity(); i++) {
                String one = Row.of(external.getField(i)).toString();
                fs.add(one.substring(3, one.length() - 1));
            }
            if (!("+I[" + String.join(", ", fs) + "]").equals(external.toString())) {
                throw new IllegalStateException("field texts do not make up the line: " + external);
            }
            fields.add(fs);
        }

        PrintStream saved = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            tEnv.executeSql("INSERT INTO sink SELECT * FROM src").await();
        } finally {
            System.out.flush();
            System.setOut(saved);
        }
        String printed = buf.toString(StandardCharsets.UTF_8);
        String id = options.getOrDefault("print-identifier", "");
        StringBuilder expected = new StringBuilder();
        for (String l : lines) expected.append(id.isEmpty() ? "" : id + "> ").append(l).append(System.lineSeparator());
        if (!expected.toString().equals(printed)) {
            throw new IllegalStateException("the print connector printed for " + t.name + ":\n" + printed
                    + "\n--- but Row.toString() of the rows gives:\n" + expected);
        }
        return new Printed(printed, lines, fields);
    }

    static ObjectNode header(Map<String, String> options) {
        ObjectNode doc = F.objectNode();
        doc.put("connector", "print");
        doc.put("flink_version", "1.18.1");
        doc.put("generator", "tests/golden/flink-formats (PrintVectors: INSERT INTO a 'print' table in a local StreamTableEnvironment, parallelism 1, stdout as UTF-8)");
        ObjectNode o = doc.putObject("options");
        options.forEach(o::put);
        return doc;
    }
}
