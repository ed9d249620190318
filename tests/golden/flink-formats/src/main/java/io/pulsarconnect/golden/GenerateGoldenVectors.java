package io.pulsarconnect.golden;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.formats.avro.AvroFormatFactory;
import org.apache.flink.formats.avro.typeutils.AvroSchemaConverter;
import org.apache.flink.formats.csv.CsvFormatFactory;
import org.apache.flink.formats.json.JsonFormatFactory;
import org.apache.flink.formats.raw.RawFormatFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.util.DefaultIndenter;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.SerializationFormatFactory;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;

import java.io.InputStream;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TimeZone;

import static io.pulsarconnect.golden.Values.F;

/**
 * Writes the golden vectors of Flink 1.18.1's json/avro/csv/raw formats, its changelog formats debezium-json/canal-json/maxwell-json
 * (ChangelogVectors) and its print connector (PrintVectors). Usage: GenerateGoldenVectors OUT_DIR.
 * Every output is a pure function of this program, table-spec.json and the Flink jars (no clocks, no randomness).
 */
public final class GenerateGoldenVectors {

    static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    static Path out;
    static int files = 0;

    /** A table: names + Flink SQL type strings, parsed with Flink's own LogicalTypeParser. */
    static final class Table {
        final String name;
        final List<String> names = new ArrayList<>();
        final List<String> types = new ArrayList<>();
        Table(String name) { this.name = name; }
        Table col(String n, String t) { names.add(n); types.add(t); return this; }
        RowType rowType() {
            List<RowType.RowField> fs = new ArrayList<>();
            for (int i = 0; i < names.size(); i++) fs.add(new RowType.RowField(names.get(i), LogicalTypeParser.parse(types.get(i), Flink.CL)));
            return new RowType(false, fs);
        }
        Table only(List<String> keep) {
            Table t = new Table(name);
            for (int i = 0; i < names.size(); i++) if (keep.contains(names.get(i))) t.col(names.get(i), types.get(i));
            return t;
        }
        ArrayNode columnsJson() {
            ArrayNode a = F.arrayNode();
            for (int i = 0; i < names.size(); i++) a.add(F.objectNode().put("name", names.get(i)).put("type", types.get(i)));
            return a;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GenerateGoldenVectors OUT_DIR");
            System.exit(2);
        }
        TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        Locale.setDefault(Locale.ROOT);
        out = Paths.get(args[0]).toAbsolutePath();

        JsonNode spec;
        try (InputStream in = GenerateGoldenVectors.class.getResourceAsStream("/table-spec.json")) {
            spec = MAPPER.readTree(in);
        }
        Table all = new Table(spec.get("name").textValue());
        for (JsonNode c : spec.get("columns")) all.col(c.get("name").textValue(), c.get("type").textValue());
        RowType allType = all.rowType();
        List<String> rowNames = new ArrayList<>();
        List<JsonNode> rows = new ArrayList<>();
        for (JsonNode r : spec.get("rows")) {
            rowNames.add(r.get("name").textValue());
            // validate + canonicalise: JSON -> RowData -> JSON
            rows.add(Values.fromRow(Values.toRow(r.get("values"), allType), allType));
        }
        ObjectNode table = F.objectNode();
        table.put("name", all.name);
        table.put("generator", "tests/golden/flink-formats (Flink 1.18.1)");
        table.set("columns", all.columnsJson());
        ArrayNode rs = table.putArray("rows");
        for (int i = 0; i < rows.size(); i++) rs.add(F.objectNode().put("name", rowNames.get(i)).set("values", rows.get(i)));
        write("table.json", table);

        Context ctx = new Context(all, rowNames, rows);
        jsonVectors(ctx);
        avroVectors(ctx);
        csvVectors(ctx);
        rawVectors();
        ChangelogVectors.writeAll(ctx);
        PrintVectors.write(ctx);
        System.err.println("golden vectors: wrote " + files + " files under " + out);
    }

    static final class Context {
        final Table all;
        final List<String> rowNames;
        final List<JsonNode> rows;
        Context(Table all, List<String> rowNames, List<JsonNode> rows) { this.all = all; this.rowNames = rowNames; this.rows = rows; }
    }

    // ================================================================== JSON

    static void jsonVectors(Context c) throws Exception {
        JsonFormatFactory f = new JsonFormatFactory();
        serFile(c, "json/default.json", "json", f, f, opts());
        serFile(c, "json/timestamp-iso8601.json", "json", f, f, opts("json.timestamp-format.standard", "ISO-8601"));
        serFile(c, "json/timestamp-sql.json", "json", f, f, opts("json.timestamp-format.standard", "SQL"));
        serFile(c, "json/map-null-key-fail.json", "json", f, f, opts("json.map-null-key.mode", "FAIL"));
        serFile(c, "json/map-null-key-drop.json", "json", f, f, opts("json.map-null-key.mode", "DROP"));
        serFile(c, "json/map-null-key-literal.json", "json", f, f, opts("json.map-null-key.mode", "LITERAL", "json.map-null-key.literal", "NULL_KEY"));
        serFile(c, "json/map-null-key-literal-default.json", "json", f, f, opts("json.map-null-key.mode", "LITERAL"));
        serFile(c, "json/decimal-plain-number.json", "json", f, f, opts("json.encode.decimal-as-plain-number", "true"));
        serFile(c, "json/iso8601-literal-plain-number.json", "json", f, f,
                opts("json.timestamp-format.standard", "ISO-8601", "json.map-null-key.mode", "LITERAL", "json.map-null-key.literal", "", "json.encode.decimal-as-plain-number", "true"));

        Table t = new Table("json-decode")
                .col("id", "INT").col("name", "STRING").col("price", "DECIMAL(10, 2)").col("qty", "BIGINT")
                .col("ok", "BOOLEAN").col("score", "DOUBLE").col("ratio", "FLOAT").col("small", "TINYINT").col("d", "DATE").col("t", "TIME(3)")
                .col("ts", "TIMESTAMP(3)").col("ts9", "TIMESTAMP(9)").col("ltz", "TIMESTAMP_LTZ(3)").col("payload", "BYTES")
                .col("tags", "ARRAY<STRING>").col("attrs", "MAP<STRING, INT>").col("r", "ROW<a INT, b STRING>");
        String full = "{\"id\":1,\"name\":\"n\",\"price\":12.34,\"qty\":5,\"ok\":true,\"score\":1.5,\"ratio\":0.25,\"small\":-3,\"d\":\"2024-02-29\",\"t\":\"12:34:56.789\","
                + "\"ts\":\"2024-02-29 12:34:56.789\",\"ts9\":\"2024-02-29 12:34:56.123456789\",\"ltz\":\"2024-02-29 12:34:56.789Z\",\"payload\":\"AQID\","
                + "\"tags\":[\"a\",null],\"attrs\":{\"k\":1,\"n\":null},\"r\":{\"a\":1,\"b\":\"x\"}}";
        String fullIso = full.replace("2024-02-29 12:", "2024-02-29T12:");
        List<Object[]> in = new ArrayList<>();
        in.add(in("valid-sql-timestamps", full));
        in.add(in("valid-iso-timestamps", fullIso));
        in.add(in("all-null-values", "{\"id\":null,\"name\":null,\"price\":null,\"qty\":null,\"ok\":null,\"score\":null,\"ratio\":null,\"small\":null,\"d\":null,\"t\":null,\"ts\":null,\"ts9\":null,\"ltz\":null,\"payload\":null,\"tags\":null,\"attrs\":null,\"r\":null}"));
        in.add(in("missing-fields", "{\"id\":1}"));
        in.add(in("empty-object", "{}"));
        in.add(in("extra-fields", "{\"id\":1,\"name\":\"n\",\"unknown\":{\"deep\":[1,2,3]},\"zzz\":null}"));
        in.add(in("field-order-reversed", "{\"r\":{\"b\":\"x\",\"a\":1},\"name\":\"n\",\"id\":2}"));
        in.add(in("case-mismatch", "{\"ID\":1,\"Name\":\"n\"}"));
        in.add(in("duplicate-key", "{\"id\":1,\"id\":2}"));
        in.add(in("nested-missing", "{\"id\":1,\"r\":{}}"));
        in.add(in("nested-extra", "{\"id\":1,\"r\":{\"a\":1,\"b\":\"x\",\"c\":true}}"));
        in.add(in("int-as-string", "{\"id\":\"42\"}"));
        in.add(in("int-as-bad-string", "{\"id\":\"abc\"}"));
        in.add(in("int-as-float", "{\"id\":42.5}"));
        in.add(in("int-overflow", "{\"id\":2147483648}"));
        in.add(in("tinyint-overflow", "{\"small\":300}"));
        in.add(in("bigint-as-string", "{\"qty\":\"9223372036854775807\"}"));
        in.add(in("bool-as-string", "{\"ok\":\"true\"}"));
        in.add(in("bool-as-number", "{\"ok\":1}"));
        in.add(in("bool-bad-string", "{\"ok\":\"yes\"}"));
        in.add(in("double-as-string", "{\"score\":\"2.5\"}"));
        in.add(in("double-nan-string", "{\"score\":\"NaN\",\"ratio\":\"-Infinity\"}"));
        in.add(in("double-bare-nan", "{\"score\":NaN}"));
        in.add(in("double-exponent", "{\"score\":1e308,\"ratio\":1e39}"));
        in.add(in("decimal-as-string", "{\"price\":\"12.345\"}"));
        in.add(in("decimal-rounding", "{\"price\":12.345}"));
        in.add(in("decimal-overflow", "{\"price\":123456789012.5}"));
        in.add(in("decimal-exponent", "{\"price\":1.2E3}"));
        in.add(in("string-from-number", "{\"name\":123}"));
        in.add(in("string-from-object", "{\"name\":{\"a\":1}}"));
        in.add(in("string-from-array", "{\"name\":[1,\"x\"]}"));
        in.add(in("string-escapes", "{\"name\":\"\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\/\"}"));
        in.add(in("date-invalid", "{\"d\":\"2023-02-29\"}"));
        in.add(in("date-as-number", "{\"d\":19000}"));
        in.add(in("time-no-millis", "{\"t\":\"12:34:56\"}"));
        in.add(in("time-micros", "{\"t\":\"12:34:56.123456\"}"));
        in.add(in("timestamp-no-fraction", "{\"ts\":\"2024-02-29 12:34:56\"}"));
        in.add(in("timestamp-nanos-into-millis", "{\"ts\":\"2024-02-29 12:34:56.123456789\"}"));
        in.add(in("timestamp-with-zone", "{\"ts\":\"2024-02-29T12:34:56.789Z\"}"));
        in.add(in("timestamp-bad", "{\"ts\":\"yesterday\"}"));
        in.add(in("timestamp-as-number", "{\"ts\":1700000000000}"));
        in.add(in("ltz-without-z", "{\"ltz\":\"2024-02-29 12:34:56.789\"}"));
        in.add(in("ltz-with-offset", "{\"ltz\":\"2024-02-29T12:34:56.789+01:00\"}"));
        in.add(in("bytes-bad-base64", "{\"payload\":\"***\"}"));
        in.add(in("array-from-string", "{\"tags\":\"abc\"}"));
        in.add(in("array-wrong-element", "{\"tags\":[1,true,{\"x\":1}]}"));
        in.add(in("map-from-array", "{\"attrs\":[1,2]}"));
        in.add(in("map-bad-value", "{\"attrs\":{\"k\":\"v\"}}"));
        in.add(in("row-from-string", "{\"r\":\"x\"}"));
        in.add(in("top-level-array", "[1,2]"));
        in.add(in("top-level-scalar", "42"));
        in.add(in("top-level-null", "null"));
        in.add(in("top-level-string", "\"{}\""));
        in.add(in("broken-truncated", "{\"id\": 1,"));
        in.add(in("broken-unquoted-key", "{id: 1}"));
        in.add(in("broken-single-quotes", "{'id': 1}"));
        in.add(in("broken-trailing-comma", "{\"id\":1,}"));
        in.add(in("trailing-garbage", "{\"id\":1} x"));
        in.add(in("two-objects", "{\"id\":1}{\"id\":2}"));
        in.add(in("leading-whitespace", " \n\t{\"id\":1}\n"));
        in.add(in("comments", "{\"id\":1 /* c */}"));
        in.add(in("empty-payload", ""));
        in.add(in("whitespace-only", "   "));
        in.add(inBytes("invalid-utf8", new byte[] {'{', '"', 'n', 'a', 'm', 'e', '"', ':', '"', (byte) 0xff, (byte) 0xfe, '"', '}'}));
        in.add(inBytes("utf8-bom", concat(new byte[] {(byte) 0xef, (byte) 0xbb, (byte) 0xbf}, "{\"id\":1}".getBytes(StandardCharsets.UTF_8))));
        in.add(inBytes("null-payload", null));

        decFile("json/decode-default.json", "json", f, t, opts(), in);
        decFile("json/decode-fail-on-missing-field.json", "json", f, t, opts("json.fail-on-missing-field", "true"), in);
        decFile("json/decode-ignore-parse-errors.json", "json", f, t, opts("json.ignore-parse-errors", "true"), in);
        decFile("json/decode-fail-on-missing-field-and-ignore-parse-errors.json", "json", f, t,
                opts("json.fail-on-missing-field", "true", "json.ignore-parse-errors", "true"), in);
        decFile("json/decode-timestamp-iso8601.json", "json", f, t, opts("json.timestamp-format.standard", "ISO-8601"), in);
        decFile("json/decode-timestamp-iso8601-ignore-parse-errors.json", "json", f, t,
                opts("json.timestamp-format.standard", "ISO-8601", "json.ignore-parse-errors", "true"), in);
    }

    // ================================================================== Avro

    static void avroVectors(Context c) throws Exception {
        AvroFormatFactory f = new AvroFormatFactory();
        ObjectNode avro = serFile(c, "avro/default.json", "avro", f, f, opts());
        write("avro/all-types.avsc", avro.get("avro_schema"));

        // decode: the avro-supported part of the table, Flink's own bytes mangled
        List<String> cols = Values.names(namesOf(avro.get("columns")));
        Table t = c.all.only(cols);
        RowType rt = t.rowType();
        SerializationSchema<RowData> enc = Flink.encoder(f, "avro", opts(), rt);
        byte[] typical = enc.serialize(Values.toRow(project(c.rows.get(0), cols), rt));
        byte[] nulls = enc.serialize(Values.toRow(project(c.rows.get(1), cols), rt));
        List<Object[]> in = new ArrayList<>();
        in.add(inBytes("valid-typical", typical));
        in.add(inBytes("valid-all-nulls", nulls));
        in.add(inBytes("truncated-half", Arrays.copyOf(typical, typical.length / 2)));
        in.add(inBytes("truncated-last-byte", Arrays.copyOf(typical, typical.length - 1)));
        in.add(inBytes("extra-trailing-bytes", concat(typical, new byte[] {1, 2, 3})));
        in.add(inBytes("empty-payload", new byte[0]));
        in.add(inBytes("single-zero-byte", new byte[] {0}));
        byte[] badUnion = typical.clone();
        badUnion[1] = 0x08; // second field is a [null, boolean] union: index 4 does not exist
        in.add(inBytes("union-index-out-of-range", badUnion));
        in.add(inBytes("negative-length-string", new byte[] {0x00, 0x01, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x01}));
        in.add(inBytes("json-text", "{\"id\":1}".getBytes(StandardCharsets.UTF_8)));
        in.add(inBytes("all-0xff", filled(64, (byte) 0xff)));
        in.add(inBytes("null-payload", null));
        decFile("avro/decode-default.json", "avro", f, t, opts(), in);
    }

    static JsonNode namesOf(JsonNode columns) {
        ArrayNode a = F.arrayNode();
        for (JsonNode c : columns) a.add(c.get("name").textValue());
        return a;
    }

    // ================================================================== CSV

    static void csvVectors(Context c) throws Exception {
        CsvFormatFactory f = new CsvFormatFactory();
        serFile(c, "csv/default.json", "csv", f, f, opts());
        serFile(c, "csv/field-delimiter-semicolon.json", "csv", f, f, opts("csv.field-delimiter", ";"));
        serFile(c, "csv/field-delimiter-tab.json", "csv", f, f, opts("csv.field-delimiter", "\t"));
        serFile(c, "csv/field-delimiter-pipe.json", "csv", f, f, opts("csv.field-delimiter", "|"));
        serFile(c, "csv/disable-quote-character.json", "csv", f, f, opts("csv.disable-quote-character", "true"));
        serFile(c, "csv/quote-character-single.json", "csv", f, f, opts("csv.quote-character", "'"));
        serFile(c, "csv/allow-comments.json", "csv", f, f, opts("csv.allow-comments", "true"));
        serFile(c, "csv/array-element-delimiter-pipe.json", "csv", f, f, opts("csv.array-element-delimiter", "|"));
        serFile(c, "csv/escape-character-backslash.json", "csv", f, f, opts("csv.escape-character", "\\"));
        serFile(c, "csv/null-literal-NULL.json", "csv", f, f, opts("csv.null-literal", "NULL"));
        serFile(c, "csv/disable-quote-escape-backslash.json", "csv", f, f, opts("csv.disable-quote-character", "true", "csv.escape-character", "\\"));
        serFile(c, "csv/semicolon-single-quote-null-literal.json", "csv", f, f,
                opts("csv.field-delimiter", ";", "csv.quote-character", "'", "csv.null-literal", "n/a", "csv.array-element-delimiter", ","));

        Table t = new Table("csv-decode")
                .col("id", "INT").col("name", "STRING").col("price", "DECIMAL(10, 2)").col("ok", "BOOLEAN").col("score", "DOUBLE")
                .col("d", "DATE").col("t", "TIME(3)").col("ts", "TIMESTAMP(3)").col("payload", "BYTES").col("tags", "ARRAY<STRING>");
        List<Object[]> in = new ArrayList<>();
        in.add(in("valid", "1,n,12.34,true,1.5,2024-02-29,12:34:56.789,2024-02-29 12:34:56.789,AQID,a;b"));
        in.add(in("valid-with-newline", "1,n,12.34,true,1.5,2024-02-29,12:34:56.789,2024-02-29 12:34:56.789,AQID,a;b\n"));
        in.add(in("valid-with-crlf", "1,n,12.34,true,1.5,2024-02-29,12:34:56.789,2024-02-29 12:34:56.789,AQID,a;b\r\n"));
        in.add(in("valid-iso-timestamp", "1,n,12.34,true,1.5,2024-02-29,12:34:56.789,2024-02-29T12:34:56.789,AQID,a;b"));
        in.add(in("quoted-fields", "\"1\",\"a,b \"\"q\"\"\",\"12.34\",\"true\",\"1.5\",\"2024-02-29\",\"12:34:56.789\",\"2024-02-29 12:34:56.789\",\"AQID\",\"a;b\""));
        in.add(in("quoted-newline", "1,\"line1\nline2\",,,,,,,,"));
        in.add(in("single-quoted", "1,'a,b',,,,,,,,"));
        in.add(in("backslash-escaped", "1,a\\,b,,,,,,,,"));
        in.add(in("semicolon-delimited", "1;n;12.34;true;1.5;2024-02-29;12:34:56.789;2024-02-29 12:34:56.789;AQID;a|b"));
        in.add(in("pipe-array", "1,n,,,,,,,,a|b"));
        in.add(in("all-empty-fields", ",,,,,,,,,"));
        in.add(in("empty-quoted-strings", "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\""));
        in.add(in("null-literals", "NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL"));
        in.add(in("fewer-fields", "1,n"));
        in.add(in("more-fields", "1,n,12.34,true,1.5,2024-02-29,12:34:56.789,2024-02-29 12:34:56.789,AQID,a;b,extra,fields"));
        in.add(in("wrong-type-int", "x,n,,,,,,,,"));
        in.add(in("wrong-type-decimal", "1,n,abc,,,,,,,"));
        in.add(in("wrong-type-boolean", "1,n,,yes,,,,,,"));
        in.add(in("wrong-type-date", "1,n,,,,2023-02-29,,,,"));
        in.add(in("wrong-type-timestamp", "1,n,,,,,,yesterday,,"));
        in.add(in("bad-base64", "1,n,,,,,,,***,"));
        in.add(in("int-with-spaces", " 1 ,n,,,,,,,,"));
        in.add(in("unterminated-quote", "1,\"abc,,,,,,,,"));
        in.add(in("quote-in-unquoted-field", "1,ab\"c,,,,,,,,"));
        in.add(in("garbage-after-quote", "1,\"abc\"x,,,,,,,,"));
        in.add(in("comment-line", "# a comment"));
        in.add(in("comment-then-row", "# a comment\n1,n,,,,,,,,"));
        in.add(in("two-rows", "1,a,,,,,,,,\n2,b,,,,,,,,"));
        in.add(in("empty-payload", ""));
        in.add(in("newline-only", "\n"));
        in.add(in("unicode", "1,日本語 😀 e\u0301,,,,,,,,"));
        in.add(inBytes("invalid-utf8", new byte[] {'1', ',', (byte) 0xff, (byte) 0xfe, ',', ',', ',', ',', ',', ',', ',', ','}));
        in.add(in("nan-and-infinity", "1,n,,,NaN,,,,,"));
        in.add(in("double-infinity", "1,n,,,Infinity,,,,,"));
        in.add(in("tab-delimited", "1\tn\t\t\t\t\t\t\t\t"));
        in.add(inBytes("null-payload", null));

        decFile("csv/decode-default.json", "csv", f, t, opts(), in);
        decFile("csv/decode-ignore-parse-errors.json", "csv", f, t, opts("csv.ignore-parse-errors", "true"), in);
        decFile("csv/decode-allow-comments.json", "csv", f, t, opts("csv.allow-comments", "true"), in);
        decFile("csv/decode-allow-comments-ignore-parse-errors.json", "csv", f, t, opts("csv.allow-comments", "true", "csv.ignore-parse-errors", "true"), in);
        decFile("csv/decode-null-literal-NULL.json", "csv", f, t, opts("csv.null-literal", "NULL"), in);
        decFile("csv/decode-field-delimiter-semicolon.json", "csv", f, t, opts("csv.field-delimiter", ";", "csv.array-element-delimiter", "|"), in);
        decFile("csv/decode-field-delimiter-tab.json", "csv", f, t, opts("csv.field-delimiter", "\t"), in);
        decFile("csv/decode-escape-character-backslash.json", "csv", f, t, opts("csv.escape-character", "\\"), in);
        decFile("csv/decode-disable-quote-character.json", "csv", f, t, opts("csv.disable-quote-character", "true"), in);
        decFile("csv/decode-quote-character-single.json", "csv", f, t, opts("csv.quote-character", "'"), in);
        decFile("csv/decode-array-element-delimiter-pipe.json", "csv", f, t, opts("csv.array-element-delimiter", "|"), in);
    }

    // ================================================================== raw

    static void rawVectors() throws Exception {
        RawFormatFactory f = new RawFormatFactory();
        String[] strings = {"\"hello\"", "\"\"", "\"héllo wörld\"", "\"日本語\"", "\"😀\"", "\"e\\u0301\"", "\"a\\u0000b\"", "\"\\ufeffbom\"", "null"};
        String[] charsets = {"UTF-8", "UTF-16", "UTF-16BE", "UTF-16LE", "ISO-8859-1", "US-ASCII", "GBK"};
        for (String cs : charsets) {
            rawSerFile("raw/string-" + cs + "-big-endian.json", "STRING", strings, opts("raw.charset", cs));
        }
        rawSerFile("raw/string-UTF-8-little-endian.json", "STRING", strings, opts("raw.charset", "UTF-8", "raw.endianness", "little-endian"));
        rawSerFile("raw/varchar-UTF-8-big-endian.json", "VARCHAR(10)", new String[] {"\"abc\"", "\"\"", "null"}, opts());
        rawSerFile("raw/char-UTF-8-big-endian.json", "CHAR(3)", new String[] {"\"abc\"", "null"}, opts());
        String[] bytes = {"\"AQID\"", "\"\"", "\"AA==\"", "\"/w==\"", "null"};
        rawSerFile("raw/bytes-UTF-8-big-endian.json", "BYTES", bytes, opts());
        rawSerFile("raw/bytes-UTF-8-little-endian.json", "BYTES", bytes, opts("raw.endianness", "little-endian"));
        rawSerFile("raw/varbinary-UTF-8-big-endian.json", "VARBINARY(4)", new String[] {"\"AQID\"", "null"}, opts());
        rawSerFile("raw/binary-UTF-8-big-endian.json", "BINARY(3)", new String[] {"\"AQID\"", "null"}, opts());
        for (String end : new String[] {"big-endian", "little-endian"}) {
            Map<String, String> o = opts("raw.endianness", end);
            rawSerFile("raw/boolean-UTF-8-" + end + ".json", "BOOLEAN", new String[] {"true", "false", "null"}, o);
            rawSerFile("raw/tinyint-UTF-8-" + end + ".json", "TINYINT", new String[] {"0", "1", "-1", "127", "-128", "null"}, o);
            rawSerFile("raw/smallint-UTF-8-" + end + ".json", "SMALLINT", new String[] {"0", "1", "-1", "32767", "-32768", "258", "null"}, o);
            rawSerFile("raw/int-UTF-8-" + end + ".json", "INT", new String[] {"0", "1", "-1", "2147483647", "-2147483648", "16909060", "null"}, o);
            rawSerFile("raw/bigint-UTF-8-" + end + ".json", "BIGINT", new String[] {"0", "1", "-1", "9223372036854775807", "-9223372036854775808", "72623859790382856", "null"}, o);
            rawSerFile("raw/float-UTF-8-" + end + ".json", "FLOAT", new String[] {"0.0", "\"-0.0\"", "1.5", "-2.25", "3.4028235E38", "1.4E-45", "\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "null"}, o);
            rawSerFile("raw/double-UTF-8-" + end + ".json", "DOUBLE", new String[] {"0.0", "\"-0.0\"", "1.5", "-2.25", "1.7976931348623157E308", "4.9E-324", "\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "null"}, o);
        }
        // types raw refuses: configuration errors
        ObjectNode unsupported = F.objectNode();
        unsupported.put("format", "raw");
        ObjectNode errs = unsupported.putObject("unsupported_types");
        for (String type : new String[] {"DATE", "TIME(3)", "TIMESTAMP(3)", "TIMESTAMP_LTZ(3)", "DECIMAL(10, 2)", "ARRAY<INT>", "MAP<STRING, INT>", "ROW<a INT>"}) {
            Table t = new Table("raw-" + type).col("value", type);
            try {
                Flink.encoder(f, "raw", opts(), t.rowType());
                errs.put(type, "accepted");
            } catch (Throwable e) {
                errs.set(type, error(e));
            }
        }
        try {
            Flink.encoder(f, "raw", opts(), new Table("two").col("a", "INT").col("b", "INT").rowType());
            unsupported.put("two_columns", "accepted");
        } catch (Throwable e) {
            unsupported.set("two_columns", error(e));
        }
        write("raw/unsupported.json", unsupported);

        // decode: the same payloads under each type
        List<Object[]> in = new ArrayList<>();
        in.add(inBytes("null-payload", null));
        in.add(inBytes("empty", new byte[0]));
        in.add(inBytes("1-byte-00", new byte[] {0}));
        in.add(inBytes("1-byte-01", new byte[] {1}));
        in.add(inBytes("1-byte-02", new byte[] {2}));
        in.add(inBytes("1-byte-ff", new byte[] {(byte) 0xff}));
        in.add(inBytes("2-bytes", new byte[] {1, 2}));
        in.add(inBytes("3-bytes", new byte[] {1, 2, 3}));
        in.add(inBytes("4-bytes", new byte[] {1, 2, 3, 4}));
        in.add(inBytes("8-bytes", new byte[] {1, 2, 3, 4, 5, 6, 7, 8}));
        in.add(inBytes("9-bytes", new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9}));
        in.add(inBytes("utf8-text", "héllo 😀".getBytes(StandardCharsets.UTF_8)));
        in.add(inBytes("utf16be-text", "héllo 😀".getBytes(StandardCharsets.UTF_16BE)));
        in.add(inBytes("invalid-utf8", new byte[] {'a', (byte) 0xff, (byte) 0xc3, 'b', (byte) 0xed, (byte) 0xa0, (byte) 0x80}));
        in.add(inBytes("float-nan-bits", new byte[] {0x7f, (byte) 0xc0, 0, 0}));
        in.add(inBytes("double-neg-zero-bits", new byte[] {(byte) 0x80, 0, 0, 0, 0, 0, 0, 0}));
        String[][] dec = {
            {"STRING", "UTF-8", "big-endian"}, {"STRING", "UTF-16BE", "big-endian"}, {"STRING", "ISO-8859-1", "big-endian"},
            {"BYTES", "UTF-8", "big-endian"}, {"BOOLEAN", "UTF-8", "big-endian"}, {"TINYINT", "UTF-8", "big-endian"},
            {"SMALLINT", "UTF-8", "big-endian"}, {"SMALLINT", "UTF-8", "little-endian"},
            {"INT", "UTF-8", "big-endian"}, {"INT", "UTF-8", "little-endian"},
            {"BIGINT", "UTF-8", "big-endian"}, {"BIGINT", "UTF-8", "little-endian"},
            {"FLOAT", "UTF-8", "big-endian"}, {"FLOAT", "UTF-8", "little-endian"},
            {"DOUBLE", "UTF-8", "big-endian"}, {"DOUBLE", "UTF-8", "little-endian"},
        };
        for (String[] d : dec) {
            Table t = new Table("raw-" + d[0]).col("value", d[0]);
            decFile("raw/decode-" + d[0].toLowerCase(Locale.ROOT) + "-" + d[1] + "-" + d[2] + ".json", "raw", f, t,
                    opts("raw.charset", d[1], "raw.endianness", d[2]), in);
        }
    }

    static void rawSerFile(String path, String type, String[] jsonValues, Map<String, String> options) throws Exception {
        RawFormatFactory f = new RawFormatFactory();
        Table t = new Table("raw-" + type).col("value", type);
        RowType rt = t.rowType();
        ObjectNode doc = header("raw", options, t);
        ArrayNode vs = doc.putArray("vectors");
        SerializationSchema<RowData> enc = Flink.encoder(f, "raw", options, rt);
        DeserializationSchema<RowData> dec = Flink.decoder(f, "raw", options, rt);
        for (String jv : jsonValues) {
            ObjectNode values = F.objectNode();
            values.set("value", MAPPER.readTree(jv));
            JsonNode canon = Values.fromRow(Values.toRow(values, rt), rt);
            ObjectNode v = vs.addObject();
            v.set("values", canon);
            encodeOne(enc, dec, rt, canon, v, false);
        }
        write(path, doc);
    }

    // ================================================================== shared machinery

    /** Serialise every row of the table (columns the format supports) and decode Flink's bytes back with the same options. */
    static ObjectNode serFile(Context c, String path, String format, SerializationFormatFactory sf, DeserializationFormatFactory df,
                              Map<String, String> options) throws Exception {
        List<String> keep = new ArrayList<>();
        ObjectNode unsupported = F.objectNode();
        RowType allType = c.all.rowType();
        for (int i = 0; i < c.all.names.size(); i++) {
            String name = c.all.names.get(i);
            Table one = c.all.only(List.of(name));
            RowType rt = one.rowType();
            try {
                SerializationSchema<RowData> e = Flink.encoder(sf, format, options, rt);
                Flink.decoder(df, format, options, rt);
                e.serialize(Values.toRow(project(c.rows.get(0), List.of(name)), rt));
                keep.add(name);
            } catch (Throwable e) {
                unsupported.set(name, error(e));
            }
        }
        Table t = c.all.only(keep);
        RowType rt = t.rowType();
        ObjectNode doc = header(format, options, t);
        doc.set("unsupported_columns", unsupported);
        if (format.equals("avro")) {
            doc.set("avro_schema", MAPPER.readTree(AvroSchemaConverter.convertToSchema(rt).toString()));
        }
        ArrayNode vs = doc.putArray("vectors");
        SerializationSchema<RowData> enc = Flink.encoder(sf, format, options, rt);
        DeserializationSchema<RowData> dec = Flink.decoder(df, format, options, rt);
        boolean text = !format.equals("avro");
        for (int i = 0; i < c.rows.size(); i++) {
            ObjectNode v = vs.addObject();
            v.put("row", i);
            v.put("name", c.rowNames.get(i));
            encodeOne(enc, dec, rt, project(c.rows.get(i), keep), v, text);
        }
        write(path, doc);
        return doc;
    }

    static void encodeOne(SerializationSchema<RowData> enc, DeserializationSchema<RowData> dec, RowType rt, JsonNode values, ObjectNode v, boolean text) {
        byte[] bytes;
        try {
            bytes = enc.serialize(Values.toRow(values, rt));
        } catch (Throwable e) {
            v.set("error", error(e));
            return;
        }
        putBytes(v, bytes, text);
        if (bytes == null) return;
        try {
            RowData back = dec.deserialize(bytes);
            v.set("decoded", back == null ? F.nullNode() : Values.fromRow(back, rt));
            v.put("roundtrip_equal", back != null && Values.fromRow(back, rt).equals(values));
        } catch (Throwable e) {
            v.set("decode_error", error(e));
        }
    }

    static void decFile(String path, String format, DeserializationFormatFactory f, Table t, Map<String, String> options, List<Object[]> inputs) throws Exception {
        RowType rt = t.rowType();
        ObjectNode doc = header(format, options, t);
        DeserializationSchema<RowData> dec;
        try {
            dec = Flink.decoder(f, format, options, rt);
        } catch (Throwable e) {
            doc.set("config_error", error(e));
            write(path, doc);
            return;
        }
        boolean text = !format.equals("avro") && !format.equals("raw");
        ArrayNode cs = doc.putArray("cases");
        for (Object[] in : inputs) {
            ObjectNode c = cs.addObject();
            c.put("input", (String) in[0]);
            byte[] bytes = (byte[]) in[1];
            putBytes(c, bytes, text);
            try {
                RowData r = dec.deserialize(bytes);
                if (r == null) c.put("result", "null");
                else {
                    c.put("result", "row");
                    c.set("row", Values.fromRow(r, rt));
                }
            } catch (Throwable e) {
                c.put("result", "error");
                c.set("error", error(e));
            }
        }
        write(path, doc);
    }

    static ObjectNode header(String format, Map<String, String> options, Table t) {
        ObjectNode doc = F.objectNode();
        doc.put("format", format);
        doc.put("flink_version", "1.18.1");
        ObjectNode o = doc.putObject("options");
        options.forEach(o::put);
        doc.put("table", t.name);
        doc.set("columns", t.columnsJson());
        return doc;
    }

    static void putBytes(ObjectNode v, byte[] bytes, boolean text) {
        if (bytes == null) {
            v.putNull("base64");
            return;
        }
        v.put("base64", Base64.getEncoder().encodeToString(bytes));
        v.put("hex", hex(bytes));
        if (text) {
            try {
                v.put("text", StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString());
            } catch (CharacterCodingException e) {
                // not valid UTF-8: base64/hex only
            }
        }
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static JsonNode project(JsonNode row, List<String> keep) {
        ObjectNode o = F.objectNode();
        row.fieldNames().forEachRemaining(n -> {
            if (keep.contains(n)) o.set(n, row.get(n));
        });
        return o;
    }

    /** Error class + message, then the cause chain; object identity hashes are masked so output is deterministic. */
    static ObjectNode error(Throwable e) {
        ObjectNode o = F.objectNode();
        o.put("class", e.getClass().getName());
        o.put("message", sanitize(e.getMessage()));
        ArrayNode causes = F.arrayNode();
        Throwable c = e.getCause();
        int depth = 0;
        while (c != null && c != c.getCause() && depth++ < 6) {
            causes.addObject().put("class", c.getClass().getName()).put("message", sanitize(c.getMessage()));
            c = c.getCause();
        }
        if (causes.size() > 0) o.set("causes", causes);
        return o;
    }

    static String sanitize(String m) {
        if (m == null) return null;
        return m.replaceAll("(\\.[A-Z][\\w$]*)@[0-9a-f]{1,8}\\b", "$1@<hash>") // Object.toString of a class: short hashes too
                .replaceAll("@[0-9a-f]{5,8}\\b", "@<hash>")
                .replaceAll("\\(through reference chain: [^)]*\\)", "(through reference chain: <elided>)");
    }

    static Object[] in(String name, String text) {
        return new Object[] {name, text.getBytes(StandardCharsets.UTF_8)};
    }

    static Object[] inBytes(String name, byte[] bytes) {
        return new Object[] {name, bytes};
    }

    static byte[] concat(byte[] a, byte[] b) {
        byte[] r = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, r, a.length, b.length);
        return r;
    }

    static byte[] filled(int n, byte v) {
        byte[] b = new byte[n];
        Arrays.fill(b, v);
        return b;
    }

    static Map<String, String> opts(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
        return m;
    }

    static void write(String rel, JsonNode doc) throws Exception {
        Path p = out.resolve(rel);
        Files.createDirectories(p.getParent());
        DefaultPrettyPrinter pp = new DefaultPrettyPrinter().withArrayIndenter(DefaultIndenter.SYSTEM_LINEFEED_INSTANCE);
        pp = pp.withObjectIndenter(new DefaultIndenter("  ", "\n"));
        pp.indentArraysWith(new DefaultIndenter("  ", "\n"));
        String s = MAPPER.writer(pp).without(JsonGenerator.Feature.ESCAPE_NON_ASCII).writeValueAsString(doc);
        Files.write(p, (s + "\n").getBytes(StandardCharsets.UTF_8));
        files++;
    }
}
