package io.pulsarconnect.golden;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.formats.json.canal.CanalJsonFormatFactory;
import org.apache.flink.formats.json.debezium.DebeziumJsonFormatFactory;
import org.apache.flink.formats.json.maxwell.MaxwellJsonFormatFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.table.connector.format.DecodingFormat;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.SerializationFormatFactory;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;
import org.apache.flink.table.types.utils.TypeConversions;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.Collector;

import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import static io.pulsarconnect.golden.GenerateGoldenVectors.error;
import static io.pulsarconnect.golden.GenerateGoldenVectors.in;
import static io.pulsarconnect.golden.GenerateGoldenVectors.inBytes;
import static io.pulsarconnect.golden.GenerateGoldenVectors.opts;
import static io.pulsarconnect.golden.GenerateGoldenVectors.project;
import static io.pulsarconnect.golden.GenerateGoldenVectors.write;
import static io.pulsarconnect.golden.Values.F;

/**
 * Golden vectors of Flink 1.18.1's changelog JSON formats ({@code debezium-json}, {@code canal-json},
 * {@code maxwell-json}, all in flink-json): every row of the all-types table serialized under each of the four
 * {@link RowKind}s, and a fixed list of messages decoded on a small {@code products} table, with and without the
 * format's metadata. Decoders and encoders come from the format factories as the SQL planner makes them; metadata
 * keys are requested through {@code DecodingFormat.applyReadableMetadata} in {@code listReadableMetadata} order
 * (the order the planner uses), and the produced row is read as physical fields followed by the metadata fields.
 */
final class ChangelogVectors {
    private ChangelogVectors() {}

    static final RowKind[] KINDS = {RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE};

    /** The decode table: numbers, a decimal, timestamps (with and without zone), an array, a NOT NULL key. */
    static final GenerateGoldenVectors.Table PRODUCTS = new GenerateGoldenVectors.Table("products")
            .col("id", "INT NOT NULL").col("name", "STRING").col("description", "STRING").col("weight", "DOUBLE")
            .col("price", "DECIMAL(10, 2)").col("ts", "TIMESTAMP(3)").col("ltz", "TIMESTAMP_LTZ(3)").col("tags", "ARRAY<STRING>");

    static void writeAll(GenerateGoldenVectors.Context c) throws Exception {
        debezium(c);
        canal(c);
        maxwell(c);
    }

    /** JSON text with ' for " (none of the inputs below needs a literal apostrophe). */
    static String j(String s) {
        return s.replace('\'', '"');
    }

    static void serSets(GenerateGoldenVectors.Context c, String format, SerializationFormatFactory sf, DeserializationFormatFactory df) throws Exception {
        String p = format + ".";
        serFile(c, format + "/default.json", format, sf, df, opts());
        serFile(c, format + "/timestamp-iso8601.json", format, sf, df, opts(p + "timestamp-format.standard", "ISO-8601"));
        serFile(c, format + "/map-null-key-literal.json", format, sf, df, opts(p + "map-null-key.mode", "LITERAL", p + "map-null-key.literal", "NULL_KEY"));
        serFile(c, format + "/decimal-plain-number.json", format, sf, df, opts(p + "encode.decimal-as-plain-number", "true"));
    }

    // ================================================================== debezium-json

    static final String DBZ_SOURCE = "{'version':'1.9.7.Final','connector':'mysql','name':'dbserver1','ts_ms':1589362330000,'snapshot':'false',"
            + "'db':'inventory','sequence':null,'table':'products','server_id':223344,'gtid':null,'file':'mysql-bin.000003','pos':2090,'row':0,'thread':7,'query':null}";
    static final String DBZ_SOURCE_SNAPSHOT = DBZ_SOURCE.replace("'snapshot':'false'", "'snapshot':'true'").replace("'ts_ms':1589362330000", "'ts_ms':1589355606000");
    static final String DBZ_SOURCE_PG = "{'version':'1.9.7.Final','connector':'postgresql','name':'pgserver1','ts_ms':1589362330000,'snapshot':'false',"
            + "'db':'inventory','sequence':'[null,\\\"24023128\\\"]','schema':'public','table':'products','txId':555,'lsn':24023128,'xmin':null}";
    static final String P101 = "{'id':101,'name':'scooter','description':'Small 2-wheel scooter','weight':3.14,'price':12.5,"
            + "'ts':'2020-05-13 09:12:10.123','ltz':'2020-05-13 09:12:10.123Z','tags':['red','fast']}";
    static final String P101_UPDATED = "{'id':101,'name':'scooter','description':'Small 2-wheel scooter','weight':5.18,'price':13.99,"
            + "'ts':'2020-05-13 09:12:10.123','ltz':'2020-05-13 09:15:00.000Z','tags':['red','fast']}";
    static final String P102 = "{'id':102,'name':'car battery','description':'12V car battery','weight':8.1,'price':99.0,"
            + "'ts':'2020-05-13 09:12:11.000','ltz':'2020-05-13 09:12:11.000Z','tags':[]}";

    static String dbz(String before, String after, String op) {
        return dbzWith(before, after, "'" + op + "'", DBZ_SOURCE);
    }

    static String dbzWith(String before, String after, String opJson, String source) {
        return "{'before':" + before + ",'after':" + after + ",'source':" + source + ",'op':" + opJson + ",'ts_ms':1589362330904,'transaction':null}";
    }

    static final String DBZ_VALUE_SCHEMA = "{'type':'struct','fields':[{'type':'int32','optional':false,'field':'id'},{'type':'string','optional':true,'field':'name'},"
            + "{'type':'string','optional':true,'field':'description'},{'type':'double','optional':true,'field':'weight'},{'type':'double','optional':true,'field':'price'},"
            + "{'type':'string','optional':true,'field':'ts'},{'type':'string','optional':true,'field':'ltz'},"
            + "{'type':'array','items':{'type':'string','optional':true},'optional':true,'field':'tags'}],'optional':true,'name':'dbserver1.inventory.products.Value',";
    static final String DBZ_SCHEMA = "{'type':'struct','fields':[" + DBZ_VALUE_SCHEMA + "'field':'before'}," + DBZ_VALUE_SCHEMA + "'field':'after'},"
            + "{'type':'struct','fields':[{'type':'string','optional':false,'field':'version'},{'type':'string','optional':false,'field':'connector'},"
            + "{'type':'int64','optional':false,'field':'ts_ms'},{'type':'string','optional':false,'field':'db'},{'type':'string','optional':true,'field':'table'}],"
            + "'optional':false,'name':'io.debezium.connector.mysql.Source','field':'source'},{'type':'string','optional':false,'field':'op'},"
            + "{'type':'int64','optional':true,'field':'ts_ms'}],'optional':false,'name':'dbserver1.inventory.products.Envelope'}";

    static String wrapped(String payload) {
        return "{'schema':" + DBZ_SCHEMA + ",'payload':" + payload + "}";
    }

    static void debezium(GenerateGoldenVectors.Context c) throws Exception {
        DebeziumJsonFormatFactory f = new DebeziumJsonFormatFactory();
        String fmt = "debezium-json";
        serSets(c, fmt, f, f);
        // Flink refuses schema-include for serialization (a configuration error)
        serFile(c, fmt + "/schema-include.json", fmt, f, f, opts(fmt + ".schema-include", "true"));

        String insert = dbz("null", P101, "c");
        String update = dbz(P101, P101_UPDATED, "u");
        String delete = dbz(P101_UPDATED, "null", "d");
        List<Object[]> in = new ArrayList<>();
        in.add(in("insert-op-c", j(insert)));
        in.add(in("snapshot-read-op-r", j(dbzWith("null", P102, "'r'", DBZ_SOURCE_SNAPSHOT))));
        in.add(in("update-op-u", j(update)));
        in.add(in("update-key-change", j(dbz(P101, P101.replace("'id':101", "'id':1101"), "u"))));
        in.add(in("update-before-null", j(dbz("null", P101_UPDATED, "u"))));
        in.add(in("update-after-null", j(dbz(P101, "null", "u"))));
        in.add(in("delete-op-d", j(delete)));
        in.add(in("delete-before-null", j(dbz("null", "null", "d"))));
        in.add(in("insert-after-null", j(dbz("null", "null", "c"))));
        in.add(in("insert-with-before", j(dbz(P102, P101, "c"))));
        in.add(in("truncate-op-t", j(dbz("null", "null", "t"))));
        in.add(in("message-op-m", j("{'op':'m','ts_ms':1589362330904,'source':" + DBZ_SOURCE + ",'message':{'prefix':'p','content':'AQID'}}")));
        in.add(in("op-uppercase", j(dbz("null", P101, "C"))));
        in.add(in("op-number", j(dbzWith("null", P101, "1", DBZ_SOURCE))));
        in.add(in("op-null", j(dbzWith("null", P101, "null", DBZ_SOURCE))));
        in.add(in("op-missing", j("{'before':null,'after':" + P101 + ",'source':" + DBZ_SOURCE + ",'ts_ms':1589362330904}")));
        in.add(in("duplicate-op-key", j("{'before':null,'after':" + P101 + ",'op':'c','op':'d'}")));
        in.add(in("schema-include-insert", j(wrapped(insert))));
        in.add(in("schema-include-update", j(wrapped(update))));
        in.add(in("schema-include-delete", j(wrapped(delete))));
        in.add(in("schema-include-update-before-null", j(wrapped(dbz("null", P101_UPDATED, "u")))));
        in.add(in("schema-include-truncate-op-t", j(wrapped(dbz("null", "null", "t")))));
        in.add(in("schema-include-payload-missing", j("{'schema':" + DBZ_SCHEMA + "}")));
        // what Kafka Connect's JsonConverter (schemas.enable=true) writes for a null value
        in.add(in("schema-include-null-value", j("{'schema':null,'payload':null}")));
        in.add(in("postgres-update", j(dbzWith(P101, P101_UPDATED, "'u'", DBZ_SOURCE_PG))));
        in.add(in("source-null", j(dbzWith("null", P101, "'c'", "null"))));
        in.add(in("source-ts-ms-not-a-number", j(dbzWith("null", P101, "'c'", DBZ_SOURCE.replace("'ts_ms':1589362330000", "'ts_ms':'yesterday'")))));
        in.add(in("source-nested-value", j(dbzWith("null", P101, "'c'", "{'db':'inventory','table':'products','ts_ms':1,'nested':{'a':[1,2]},'flag':true}"))));
        in.add(in("ts-ms-missing", j("{'before':null,'after':" + P101 + ",'source':" + DBZ_SOURCE + ",'op':'c'}")));
        in.add(in("minimal-insert", j("{'after':{'id':1},'op':'c'}")));
        in.add(in("nulls-in-fields", j(dbz("null", "{'id':101,'name':null,'description':null,'weight':null,'price':null,'ts':null,'ltz':null,'tags':null}", "c"))));
        in.add(in("missing-fields", j(dbz("null", "{'id':101}", "c"))));
        in.add(in("not-null-id-is-null", j(dbz("null", "{'id':null,'name':'no key'}", "c"))));
        in.add(in("not-null-id-missing", j(dbz("null", "{'name':'no key'}", "c"))));
        in.add(in("extra-fields", j(dbz("null", "{'id':101,'color':'red','nested':{'a':1},'name':'x'}", "c"))));
        in.add(in("id-as-string", j(dbz("null", "{'id':'101'}", "c"))));
        in.add(in("id-as-fraction", j(dbz("null", "{'id':101.7}", "c"))));
        in.add(in("id-overflow", j(dbz("null", "{'id':2147483648}", "c"))));
        in.add(in("weight-wrong-type", j(dbz("null", "{'id':101,'weight':'heavy'}", "c"))));
        in.add(in("weight-as-string", j(dbz("null", "{'id':101,'weight':'3.14'}", "c"))));
        in.add(in("price-as-string", j(dbz("null", "{'id':101,'price':'12.50'}", "c"))));
        in.add(in("price-rounding", j(dbz("null", "{'id':101,'price':12.345}", "c"))));
        in.add(in("price-overflow", j(dbz("null", "{'id':101,'price':123456789012.5}", "c"))));
        in.add(in("price-debezium-precise-bytes", j(dbz("null", "{'id':101,'price':'BNI='}", "c"))));
        in.add(in("ts-iso8601", j(dbz("null", "{'id':101,'ts':'2020-05-13T09:12:10.123','ltz':'2020-05-13T09:12:10.123Z'}", "c"))));
        in.add(in("ts-epoch-millis", j(dbz("null", "{'id':101,'ts':1589361130123}", "c"))));
        in.add(in("ts-micros", j(dbz("null", "{'id':101,'ts':'2020-05-13 09:12:10.123456'}", "c"))));
        in.add(in("ts-no-fraction", j(dbz("null", "{'id':101,'ts':'2020-05-13 09:12:10'}", "c"))));
        in.add(in("ltz-without-z", j(dbz("null", "{'id':101,'ltz':'2020-05-13 09:12:10.123'}", "c"))));
        in.add(in("ltz-with-offset", j(dbz("null", "{'id':101,'ltz':'2020-05-13T09:12:10.123+02:00'}", "c"))));
        in.add(in("tags-with-null-and-empty", j(dbz("null", "{'id':101,'tags':['a',null,'']}", "c"))));
        in.add(in("tags-not-an-array", j(dbz("null", "{'id':101,'tags':'a,b'}", "c"))));
        in.add(in("tags-wrong-element", j(dbz("null", "{'id':101,'tags':[1,{'x':1}]}", "c"))));
        in.add(in("after-not-an-object", j(dbz("null", "'scooter'", "c"))));
        in.add(in("unicode", j(dbz("null", "{'id':101,'name':'日本語 😀','description':'caf\\u00e9\\n\\t\\\"q\\\"'}", "c"))));
        in.add(in("trailing-garbage", j(insert) + " x"));
        in.add(in("malformed-truncated", j(insert).substring(0, 60)));
        in.add(in("not-json", "hello"));
        in.add(in("empty-object", "{}"));
        in.add(in("json-null", "null"));
        in.add(in("top-level-array", "[1,2]"));
        in.add(in("whitespace-only", "  "));
        in.add(in("empty-payload", ""));
        in.add(inBytes("tombstone-null-payload", null));

        String p = fmt + ".";
        decFile(fmt + "/decode-default.json", fmt, f, PRODUCTS, opts(), false, in);
        decFile(fmt + "/decode-schema-include.json", fmt, f, PRODUCTS, opts(p + "schema-include", "true"), false, in);
        decFile(fmt + "/decode-ignore-parse-errors.json", fmt, f, PRODUCTS, opts(p + "ignore-parse-errors", "true"), false, in);
        decFile(fmt + "/decode-timestamp-iso8601.json", fmt, f, PRODUCTS, opts(p + "timestamp-format.standard", "ISO-8601"), false, in);
        decFile(fmt + "/decode-metadata.json", fmt, f, PRODUCTS, opts(), true, in);
        decFile(fmt + "/decode-schema-include-metadata.json", fmt, f, PRODUCTS, opts(p + "schema-include", "true"), true, in);
        decFile(fmt + "/decode-ignore-parse-errors-fail-on-missing-field.json", fmt, f, PRODUCTS,
                opts(p + "ignore-parse-errors", "true", p + "fail-on-missing-field", "true"), false, in);
        decFile(fmt + "/decode-invalid-timestamp-format.json", fmt, f, PRODUCTS, opts(p + "timestamp-format.standard", "RFC-3339"), false, in);
    }

    // ================================================================== canal-json

    /** Canal writes every column value as a string. */
    static final String C101 = "{'id':'101','name':'scooter','description':'Small 2-wheel scooter','weight':'3.14','price':'12.50',"
            + "'ts':'2020-05-13 09:12:10.123','ltz':'2020-05-13 09:12:10.123Z','tags':null}";
    static final String C102 = "{'id':'102','name':'car battery','description':'12V car battery','weight':'8.1','price':'99.00',"
            + "'ts':'2020-05-13 09:12:11.000','ltz':'2020-05-13 09:12:11.000Z','tags':null}";
    static final String C103 = "{'id':'103','name':'12-pack drill bits','description':'12-pack of drill bits with sizes ranging from #40 to #3','weight':'0.8','price':'7.25',"
            + "'ts':'2020-05-13 09:12:12.000','ltz':null,'tags':null}";

    static String canal(String data, String old, String type) {
        return canalIn("'inventory'", "'products'", data, old, type, false);
    }

    static String canalIn(String database, String table, String data, String old, String type, boolean ddl) {
        String mysqlType = ddl ? "null" : "{'id':'int','name':'varchar(255)','description':'varchar(512)','weight':'double','price':'decimal(10,2)','ts':'datetime(3)','ltz':'timestamp(3)','tags':'json'}";
        String sqlType = ddl ? "null" : "{'id':4,'name':12,'description':12,'weight':8,'price':3,'ts':93,'ltz':93,'tags':12}";
        String pk = ddl ? "null" : "['id']";
        String sql = ddl ? "'ALTER TABLE products ADD COLUMN color varchar(16)'" : "''";
        return "{'data':" + data + "," + (database == null ? "" : "'database':" + database + ",") + "'es':1589373515000,'id':3,'isDdl':" + ddl
                + ",'mysqlType':" + mysqlType + ",'old':" + old + ",'pkNames':" + pk + ",'sql':" + sql + ",'sqlType':" + sqlType
                + "," + (table == null ? "" : "'table':" + table + ",") + "'ts':1589373515477,'type':" + type + "}";
    }

    static void canal(GenerateGoldenVectors.Context c) throws Exception {
        CanalJsonFormatFactory f = new CanalJsonFormatFactory();
        String fmt = "canal-json";
        serSets(c, fmt, f, f);

        String c101w = C101.replace("'weight':'3.14'", "'weight':'5.18'");
        String c102n = C102.replace("'name':'car battery'", "'name':'battery'");
        List<Object[]> in = new ArrayList<>();
        in.add(in("insert-multi", j(canal("[" + C101 + "," + C102 + "," + C103 + "]", "null", "'INSERT'"))));
        in.add(in("insert-json-typed-values", j(canal("[{'id':104,'name':'hammer','description':null,'weight':0.75,'price':5.5,'ts':'2020-05-13 09:12:13.000','ltz':null,'tags':['tool']}]", "null", "'INSERT'"))));
        in.add(in("update-partial-old", j(canal("[" + c101w + "]", "[{'weight':'3.14'}]", "'UPDATE'"))));
        in.add(in("update-multi-same-old-keys", j(canal("[" + c101w + "," + C102.replace("'weight':'8.1'", "'weight':'5.18'") + "]", "[{'weight':'3.14'},{'weight':'8.1'}]", "'UPDATE'"))));
        in.add(in("update-multi-different-old-keys", j(canal("[" + c101w + "," + c102n + "]", "[{'weight':'3.14'},{'name':'car battery'}]", "'UPDATE'"))));
        in.add(in("update-old-explicit-null", j(canal("[" + C101 + "]", "[{'description':null}]", "'UPDATE'"))));
        in.add(in("update-old-empty-object", j(canal("[" + C101 + "]", "[{}]", "'UPDATE'"))));
        in.add(in("update-key-change", j(canal("[" + C101.replace("'id':'101'", "'id':'1101'") + "]", "[{'id':'101'}]", "'UPDATE'"))));
        in.add(in("update-old-shorter-than-data", j(canal("[" + c101w + "," + c102n + "]", "[{'weight':'3.14'}]", "'UPDATE'"))));
        in.add(in("update-old-longer-than-data", j(canal("[" + c101w + "]", "[{'weight':'3.14'},{'name':'x'}]", "'UPDATE'"))));
        in.add(in("update-old-null", j(canal("[" + c101w + "]", "null", "'UPDATE'"))));
        in.add(in("delete-multi", j(canal("[" + C102 + "," + C103 + "]", "null", "'DELETE'"))));
        in.add(in("delete-with-old", j(canal("[" + C102 + "]", "[{'weight':'1.0'}]", "'DELETE'"))));
        in.add(in("ddl-create", j("{'data':null,'database':'inventory','es':1589373566000,'id':13,'isDdl':true,'mysqlType':null,'old':null,'pkNames':null,"
                + "'sql':'CREATE TABLE `xj_`.`user02` (`uid` int(0) NOT NULL,`uname` varchar(255) NULL, PRIMARY KEY (`uid`))','sqlType':null,'table':'user02','ts':1589373566000,'type':'CREATE'}")));
        in.add(in("ddl-create-products", j(canalIn("'inventory'", "'products'", "null", "null", "'CREATE'", true))));
        in.add(in("ddl-alter", j(canalIn("'inventory'", "'products'", "null", "null", "'ALTER'", true))));
        in.add(in("ddl-erase", j(canalIn("'inventory'", "'products'", "null", "null", "'ERASE'", true))));
        in.add(in("ddl-truncate", j(canalIn("'inventory'", "'products'", "null", "null", "'TRUNCATE'", true))));
        in.add(in("insert-data-null", j(canal("null", "null", "'INSERT'"))));
        in.add(in("insert-data-empty", j(canal("[]", "null", "'INSERT'"))));
        in.add(in("insert-data-not-an-array", j(canal(C101, "null", "'INSERT'"))));
        in.add(in("other-database", j(canalIn("'other'", "'products'", "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("other-table", j(canalIn("'inventory'", "'orders'", "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("other-table-unknown-type", j(canalIn("'inventory'", "'orders'", "{'not':'an array'}", "null", "'UPSERT'", false))));
        in.add(in("table-name-longer-than-pattern", j(canalIn("'inventory'", "'products_archive'", "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("database-missing", j(canalIn(null, "'products'", "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("database-null", j(canalIn("null", "'products'", "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("table-missing", j(canalIn("'inventory'", null, "[" + C101 + "]", "null", "'INSERT'", false))));
        in.add(in("type-lowercase", j(canal("[" + C101 + "]", "null", "'insert'"))));
        in.add(in("type-unknown", j(canal("[" + C101 + "]", "null", "'UPSERT'"))));
        in.add(in("type-null", j(canal("[" + C101 + "]", "null", "null"))));
        in.add(in("type-missing", j("{'data':[" + C101 + "],'database':'inventory','table':'products'}")));
        in.add(in("minimal-insert", j("{'data':[{'id':'1'}],'type':'INSERT'}")));
        in.add(in("metadata-fields-null", j("{'data':[" + C101 + "],'database':null,'table':null,'sqlType':null,'pkNames':null,'es':null,'ts':null,'type':'INSERT'}")));
        in.add(in("nulls-in-fields", j(canal("[{'id':'101','name':null,'description':null,'weight':null,'price':null,'ts':null,'ltz':null,'tags':null}]", "null", "'INSERT'"))));
        in.add(in("not-null-id-is-null", j(canal("[{'id':null,'name':'no key'}]", "null", "'INSERT'"))));
        in.add(in("weight-wrong-type", j(canal("[{'id':'101','weight':'heavy'}]", "null", "'INSERT'"))));
        in.add(in("price-rounding", j(canal("[{'id':'101','price':'12.345'}]", "null", "'INSERT'"))));
        in.add(in("tags-as-json-text", j(canal("[{'id':'101','tags':'[\\\"a\\\",\\\"b\\\"]'}]", "null", "'INSERT'"))));
        in.add(in("ts-iso8601", j(canal("[{'id':'101','ts':'2020-05-13T09:12:10.123','ltz':'2020-05-13T09:12:10.123Z'}]", "null", "'INSERT'"))));
        in.add(in("ts-no-fraction", j(canal("[{'id':'101','ts':'2020-05-13 09:12:10'}]", "null", "'INSERT'"))));
        in.add(in("ltz-without-z", j(canal("[{'id':'101','ltz':'2020-05-13 09:12:10'}]", "null", "'INSERT'"))));
        in.add(in("unicode", j(canal("[{'id':'101','name':'日本語 😀','description':'caf\\u00e9\\n'}]", "null", "'INSERT'"))));
        in.add(in("malformed-truncated", j(canal("[" + C101 + "]", "null", "'INSERT'")).substring(0, 60)));
        in.add(in("not-json", "hello"));
        in.add(in("empty-object", "{}"));
        in.add(in("json-null", "null"));
        in.add(in("top-level-array", "[1,2]"));
        in.add(in("whitespace-only", "  "));
        in.add(in("empty-payload", ""));
        in.add(inBytes("null-payload", null));

        String p = fmt + ".";
        decFile(fmt + "/decode-default.json", fmt, f, PRODUCTS, opts(), false, in);
        decFile(fmt + "/decode-ignore-parse-errors.json", fmt, f, PRODUCTS, opts(p + "ignore-parse-errors", "true"), false, in);
        decFile(fmt + "/decode-timestamp-iso8601.json", fmt, f, PRODUCTS, opts(p + "timestamp-format.standard", "ISO-8601"), false, in);
        decFile(fmt + "/decode-database-table-include.json", fmt, f, PRODUCTS, opts(p + "database.include", "inv.*", p + "table.include", "products"), false, in);
        decFile(fmt + "/decode-database-table-include-ignore-parse-errors.json", fmt, f, PRODUCTS,
                opts(p + "database.include", "inv.*", p + "table.include", "products", p + "ignore-parse-errors", "true"), false, in);
        decFile(fmt + "/decode-metadata.json", fmt, f, PRODUCTS, opts(), true, in);
        decFile(fmt + "/decode-invalid-database-include-regex.json", fmt, f, PRODUCTS, opts(p + "database.include", "(inventory"), false, in);
    }

    // ================================================================== maxwell-json

    static final String M101 = P101;
    static final String M101_UPDATED = P101_UPDATED;

    static String maxwell(String type, String data, String old) {
        return "{'database':'test','table':'product','type':" + type + ",'ts':1596684883,'xid':7125,'commit':true,'data':" + data
                + (old == null ? "" : ",'old':" + old) + ",'primary_key_columns':['id']}";
    }

    static void maxwell(GenerateGoldenVectors.Context c) throws Exception {
        MaxwellJsonFormatFactory f = new MaxwellJsonFormatFactory();
        String fmt = "maxwell-json";
        serSets(c, fmt, f, f);

        List<Object[]> in = new ArrayList<>();
        in.add(in("insert", j(maxwell("'insert'", M101, null))));
        in.add(in("insert-flink-test-data", j("{'database':'test','table':'product','type':'insert','ts':1596684883,'xid':7125,'xoffset':0,"
                + "'data':{'id':101,'name':'scooter','description':'Small 2-wheel scooter','weight':3.14},'primary_key_columns': ['id']}")));
        in.add(in("update-partial-old", j(maxwell("'update'", M101_UPDATED, "{'weight':3.14,'price':12.5,'ltz':'2020-05-13 09:12:10.123Z'}"))));
        in.add(in("update-old-one-field", j(maxwell("'update'", M101.replace("'description':'Small 2-wheel scooter'", "'description':'Big scooter'"), "{'description':'Small 2-wheel scooter'}"))));
        in.add(in("update-old-explicit-null", j(maxwell("'update'", M101, "{'description':null}"))));
        in.add(in("update-old-empty-object", j(maxwell("'update'", M101, "{}"))));
        in.add(in("update-key-change", j(maxwell("'update'", M101.replace("'id':101", "'id':1101"), "{'id':101}"))));
        in.add(in("update-old-missing", j(maxwell("'update'", M101, null))));
        in.add(in("update-old-null", j(maxwell("'update'", M101, "null"))));
        in.add(in("delete", j(maxwell("'delete'", M101_UPDATED, null))));
        in.add(in("delete-with-old", j(maxwell("'delete'", M101_UPDATED, "{'weight':1.0}"))));
        in.add(in("bootstrap-start", j("{'database':'test','table':'product','type':'bootstrap-start','ts':1596684883,'data':{}}")));
        in.add(in("bootstrap-insert", j("{'database':'test','table':'product','type':'bootstrap-insert','ts':1596684883,'data':" + M101 + "}")));
        in.add(in("bootstrap-complete", j("{'database':'test','table':'product','type':'bootstrap-complete','ts':1596684883,'data':{}}")));
        in.add(in("ddl-table-create", j("{'type':'table-create','database':'test','table':'product','def':{'database':'test','table':'product','columns':[{'type':'int','name':'id','signed':true}],'primary-key':['id']},"
                + "'ts':1596684883000,'sql':'CREATE TABLE product (id int PRIMARY KEY)'}")));
        in.add(in("type-uppercase", j(maxwell("'INSERT'", M101, null))));
        in.add(in("type-null", j(maxwell("null", M101, null))));
        in.add(in("type-missing", j("{'database':'test','table':'product','ts':1596684883,'data':" + M101 + "}")));
        in.add(in("insert-data-null", j(maxwell("'insert'", "null", null))));
        in.add(in("insert-data-missing", j("{'database':'test','table':'product','type':'insert','ts':1596684883}")));
        in.add(in("insert-data-array", j(maxwell("'insert'", "[" + M101 + "]", null))));
        in.add(in("minimal-insert", j("{'type':'insert','data':{'id':1}}")));
        in.add(in("metadata-fields-null", j("{'database':null,'table':null,'type':'insert','ts':null,'data':" + M101 + ",'primary_key_columns':null}")));
        in.add(in("ts-in-millis", j(maxwell("'insert'", M101, null).replace("'ts':1596684883", "'ts':1596684883123"))));
        in.add(in("nulls-in-fields", j(maxwell("'insert'", "{'id':101,'name':null,'description':null,'weight':null,'price':null,'ts':null,'ltz':null,'tags':null}", null))));
        in.add(in("not-null-id-is-null", j(maxwell("'insert'", "{'id':null,'name':'no key'}", null))));
        in.add(in("weight-wrong-type", j(maxwell("'insert'", "{'id':101,'weight':'heavy'}", null))));
        in.add(in("price-rounding", j(maxwell("'insert'", "{'id':101,'price':12.345}", null))));
        in.add(in("ts-iso8601", j(maxwell("'insert'", "{'id':101,'ts':'2020-05-13T09:12:10.123','ltz':'2020-05-13T09:12:10.123Z'}", null))));
        in.add(in("ts-maxwell-datetime", j(maxwell("'insert'", "{'id':101,'ts':'2020-05-13 09:12:10.123000'}", null))));
        in.add(in("ltz-without-z", j(maxwell("'insert'", "{'id':101,'ltz':'2020-05-13 09:12:10'}", null))));
        in.add(in("unicode", j(maxwell("'insert'", "{'id':101,'name':'日本語 😀','description':'caf\\u00e9\\n'}", null))));
        in.add(in("malformed-truncated", j(maxwell("'insert'", M101, null)).substring(0, 60)));
        in.add(in("not-json", "hello"));
        in.add(in("empty-object", "{}"));
        in.add(in("json-null", "null"));
        in.add(in("top-level-array", "[1,2]"));
        in.add(in("whitespace-only", "  "));
        in.add(in("empty-payload", ""));
        in.add(inBytes("null-payload", null));

        String p = fmt + ".";
        decFile(fmt + "/decode-default.json", fmt, f, PRODUCTS, opts(), false, in);
        decFile(fmt + "/decode-ignore-parse-errors.json", fmt, f, PRODUCTS, opts(p + "ignore-parse-errors", "true"), false, in);
        decFile(fmt + "/decode-timestamp-iso8601.json", fmt, f, PRODUCTS, opts(p + "timestamp-format.standard", "ISO-8601"), false, in);
        decFile(fmt + "/decode-metadata.json", fmt, f, PRODUCTS, opts(), true, in);
    }

    // ================================================================== shared machinery

    /** Every row of the table (columns the format supports) under each RowKind; Flink's bytes decoded back with the same options. */
    static void serFile(GenerateGoldenVectors.Context c, String path, String format, SerializationFormatFactory sf, DeserializationFormatFactory df,
                        Map<String, String> options) throws Exception {
        ObjectNode doc = F.objectNode();
        doc.put("format", format);
        doc.put("flink_version", "1.18.1");
        ObjectNode o = doc.putObject("options");
        options.forEach(o::put);
        doc.put("table", c.all.name);
        try {
            Flink.encoder(sf, format, options, new GenerateGoldenVectors.Table("probe").col("id", "INT NOT NULL").rowType());
        } catch (Throwable e) {
            doc.set("config_error", error(e));
            write(path, doc);
            return;
        }
        List<String> keep = new ArrayList<>();
        ObjectNode unsupported = F.objectNode();
        for (String name : c.all.names) {
            RowType rt = c.all.only(List.of(name)).rowType();
            try {
                SerializationSchema<RowData> e = Flink.encoder(sf, format, options, rt);
                Flink.decoder(df, format, options, rt);
                e.serialize(Values.toRow(project(c.rows.get(0), List.of(name)), rt));
                keep.add(name);
            } catch (Throwable e) {
                unsupported.set(name, error(e));
            }
        }
        GenerateGoldenVectors.Table t = c.all.only(keep);
        RowType rt = t.rowType();
        doc.set("columns", t.columnsJson());
        doc.set("unsupported_columns", unsupported);
        SerializationSchema<RowData> enc = Flink.encoder(sf, format, options, rt);
        DeserializationSchema<RowData> dec = Flink.decoder(df, format, options, rt);
        ArrayNode vs = doc.putArray("vectors");
        for (int i = 0; i < c.rows.size(); i++) {
            JsonNode values = project(c.rows.get(i), keep);
            for (RowKind kind : KINDS) {
                ObjectNode v = vs.addObject();
                v.put("row", i);
                v.put("name", c.rowNames.get(i));
                v.put("kind", kind.shortString());
                RowData row = Values.toRow(values, rt);
                row.setRowKind(kind);
                byte[] bytes;
                try {
                    bytes = enc.serialize(row);
                } catch (Throwable e) {
                    v.set("error", error(e));
                    continue;
                }
                putBytes(v, bytes);
                if (bytes == null) continue;
                Emitted back = run(dec, bytes, rt, List.of(), List.of());
                if (back.error != null) {
                    v.set("decode_error", error(back.error));
                    if (back.rows.size() > 0) v.set("emitted_before_error", back.rows);
                    continue;
                }
                v.set("decoded", back.rows);
                v.put("roundtrip_equal", back.rows.size() == 1
                        && back.rows.get(0).get("kind").textValue().equals(kind.shortString())
                        && back.rows.get(0).get("row").equals(values));
            }
        }
        write(path, doc);
    }

    /** A fixed list of messages decoded on {@code t}; {@code metadata}: request every readable metadata key. */
    static void decFile(String path, String format, DeserializationFormatFactory f, GenerateGoldenVectors.Table t, Map<String, String> options,
                        boolean metadata, List<Object[]> inputs) throws Exception {
        RowType rt = t.rowType();
        ObjectNode doc = GenerateGoldenVectors.header(format, options, t);
        ArrayNode mdKeys = doc.putArray("metadata");
        ObjectNode mdTypes = doc.putObject("metadata_types");
        List<String> keys = new ArrayList<>();
        List<LogicalType> types = new ArrayList<>();
        DeserializationSchema<RowData> dec;
        try {
            DecodingFormat<DeserializationSchema<RowData>> df = f.createDecodingFormat(Flink.factoryContext(), Flink.formatOptions(format, options));
            if (metadata) {
                // the planner passes the keys in listReadableMetadata order and appends them to the physical row in that order
                for (Map.Entry<String, DataType> m : df.listReadableMetadata().entrySet()) {
                    LogicalType lt = m.getValue().getLogicalType();
                    String s = lt.asSummaryString();
                    if (!LogicalTypeParser.parse(s, Flink.CL).equals(lt)) throw new IllegalStateException("type string does not round-trip: " + s);
                    keys.add(m.getKey());
                    types.add(lt);
                    mdKeys.add(m.getKey());
                    mdTypes.put(m.getKey(), s);
                }
                df.applyReadableMetadata(keys);
            }
            dec = df.createRuntimeDecoder(Flink.sourceContext(), TypeConversions.fromLogicalToDataType(rt));
            dec.open(Flink.initContext(DeserializationSchema.InitializationContext.class));
        } catch (Throwable e) {
            doc.set("config_error", error(e));
            write(path, doc);
            return;
        }
        ArrayNode cs = doc.putArray("cases");
        for (Object[] input : inputs) {
            ObjectNode c = cs.addObject();
            c.put("input", (String) input[0]);
            byte[] bytes = (byte[]) input[1];
            putBytes(c, bytes);
            Emitted e = run(dec, bytes, rt, keys, types);
            if (e.error == null) {
                c.put("result", "rows");
                c.set("rows", e.rows);
            } else {
                c.put("result", "error");
                c.set("error", error(e.error));
                if (e.rows.size() > 0) c.set("emitted_before_error", e.rows);
            }
        }
        write(path, doc);
    }

    static final class Emitted {
        final ArrayNode rows = F.arrayNode();
        Throwable error;
    }

    /** Runs the decoder's collector API; rows are converted when collected (nothing relies on Flink not reusing them). */
    static Emitted run(DeserializationSchema<RowData> dec, byte[] bytes, RowType physical, List<String> keys, List<LogicalType> types) {
        Emitted e = new Emitted();
        Collector<RowData> out = new Collector<RowData>() {
            @Override
            public void collect(RowData r) {
                e.rows.add(rowJson(r, physical, keys, types));
            }

            @Override
            public void close() {}
        };
        try {
            dec.deserialize(bytes, out);
        } catch (Throwable t) {
            e.error = t;
        }
        return e;
    }

    static ObjectNode rowJson(RowData r, RowType physical, List<String> keys, List<LogicalType> types) {
        int n = physical.getFieldCount();
        if (r.getArity() != n + keys.size()) {
            throw new IllegalStateException("produced row has arity " + r.getArity() + ", expected " + n + " + " + keys.size());
        }
        ObjectNode o = F.objectNode();
        o.put("kind", r.getRowKind().shortString());
        ObjectNode vals = o.putObject("row");
        for (int i = 0; i < n; i++) vals.set(physical.getFieldNames().get(i), field(r, i, physical.getTypeAt(i)));
        if (!keys.isEmpty()) {
            ObjectNode m = o.putObject("metadata");
            for (int k = 0; k < keys.size(); k++) m.set(keys.get(k), field(r, n + k, types.get(k)));
        }
        return o;
    }

    /** Null-safe even for NOT NULL columns: Flink's JSON decoders do not enforce NOT NULL. */
    static JsonNode field(RowData r, int pos, LogicalType t) {
        if (r.isNullAt(pos)) return F.nullNode();
        return Values.fromInternal(RowData.createFieldGetter(t.copy(true), pos).getFieldOrNull(r), t);
    }

    /** base64 + text (when valid UTF-8); no hex in the changelog files. */
    static void putBytes(ObjectNode v, byte[] bytes) {
        if (bytes == null) {
            v.putNull("base64");
            return;
        }
        v.put("base64", Base64.getEncoder().encodeToString(bytes));
        try {
            v.put("text", StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString());
        } catch (CharacterCodingException e) {
            // not UTF-8: base64 only
        }
    }
}
