package io.pulsarconnect.golden;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.POJONode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.util.RawValue;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericMapData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.LocalZonedTimestampType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.TimeType;
import org.apache.flink.table.types.logical.TimestampType;

import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The language-neutral value encoding used in every vectors/*.json file, both ways:
 * JSON value (see tests/golden/README.md) <-> Flink internal data structures (RowData & co).
 */
final class Values {
    private Values() {}

    static final JsonNodeFactory F = JsonNodeFactory.instance;

    // ------------------------------------------------------------------ JSON value -> internal

    static RowData toRow(JsonNode values, RowType type) {
        GenericRowData row = new GenericRowData(type.getFieldCount());
        Iterator<String> names = values.fieldNames();
        while (names.hasNext()) {
            String n = names.next();
            if (!type.getFieldNames().contains(n)) {
                throw new IllegalArgumentException("unknown field " + n + " for " + type);
            }
        }
        for (int i = 0; i < type.getFieldCount(); i++) {
            RowType.RowField f = type.getFields().get(i);
            JsonNode v = values.get(f.getName());
            Object o = toInternal(v, f.getType());
            if (o == null && !f.getType().isNullable()) {
                throw new IllegalArgumentException("NULL for NOT NULL field " + f.getName());
            }
            row.setField(i, o);
        }
        return row;
    }

    static Object toInternal(JsonNode v, LogicalType t) {
        if (v == null || v.isNull()) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN:
                if (!v.isBoolean()) throw bad(v, t);
                return v.booleanValue();
            case TINYINT:
                return (byte) checkedLong(v, t, Byte.MIN_VALUE, Byte.MAX_VALUE);
            case SMALLINT:
                return (short) checkedLong(v, t, Short.MIN_VALUE, Short.MAX_VALUE);
            case INTEGER:
                return (int) checkedLong(v, t, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case BIGINT:
                return checkedLong(v, t, Long.MIN_VALUE, Long.MAX_VALUE);
            case FLOAT:
                return Float.parseFloat(numberText(v));
            case DOUBLE:
                return Double.parseDouble(numberText(v));
            case DECIMAL: {
                DecimalType d = (DecimalType) t;
                BigDecimal bd = new BigDecimal(v.textValue());
                if (bd.scale() != d.getScale()) throw new IllegalArgumentException("decimal " + bd + " must have scale " + d.getScale());
                DecimalData dd = DecimalData.fromBigDecimal(bd, d.getPrecision(), d.getScale());
                if (dd == null) throw new IllegalArgumentException("decimal " + bd + " overflows " + t);
                return dd;
            }
            case CHAR:
            case VARCHAR:
                return StringData.fromString(v.textValue());
            case BINARY:
            case VARBINARY:
                return Base64.getDecoder().decode(v.textValue());
            case DATE:
                return (int) LocalDate.parse(v.textValue()).toEpochDay();
            case TIME_WITHOUT_TIME_ZONE: {
                LocalTime lt = LocalTime.parse(v.textValue());
                String back = formatTime((int) (lt.toNanoOfDay() / 1_000_000L), ((TimeType) t).getPrecision());
                if (!back.equals(v.textValue())) throw new IllegalArgumentException("time " + v + " must be written as " + back);
                return (int) (lt.toNanoOfDay() / 1_000_000L);
            }
            case TIMESTAMP_WITHOUT_TIME_ZONE: {
                TimestampData ts = TimestampData.fromLocalDateTime(LocalDateTime.parse(v.textValue()));
                String back = formatTimestamp(ts, ((TimestampType) t).getPrecision(), false);
                if (!back.equals(v.textValue())) throw new IllegalArgumentException("timestamp " + v + " must be written as " + back);
                return ts;
            }
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE: {
                TimestampData ts = TimestampData.fromInstant(Instant.parse(v.textValue()));
                String back = formatTimestamp(ts, ((LocalZonedTimestampType) t).getPrecision(), true);
                if (!back.equals(v.textValue())) throw new IllegalArgumentException("timestamp_ltz " + v + " must be written as " + back);
                return ts;
            }
            case ARRAY: {
                LogicalType et = ((ArrayType) t).getElementType();
                Object[] out = new Object[v.size()];
                for (int i = 0; i < out.length; i++) out[i] = toInternal(v.get(i), et);
                return new GenericArrayData(out);
            }
            case MAP: {
                MapType mt = (MapType) t;
                Map<Object, Object> m = new LinkedHashMap<>(); // insertion order = order in the file
                for (JsonNode pair : v) {
                    if (pair.size() != 2) throw new IllegalArgumentException("map entry must be [key, value]: " + pair);
                    m.put(toInternal(pair.get(0), mt.getKeyType()), toInternal(pair.get(1), mt.getValueType()));
                }
                return new GenericMapData(m);
            }
            case ROW:
                if (!v.isObject()) throw bad(v, t);
                return toRow(v, (RowType) t);
            default:
                throw new IllegalArgumentException("type not covered by the golden table: " + t);
        }
    }

    /** The exact text of a float: string, raw number text (canonical form) or a parsed JSON number. */
    private static String numberText(JsonNode v) {
        if (v.isTextual()) return v.textValue();
        if (v instanceof POJONode && ((POJONode) v).getPojo() instanceof RawValue) {
            return String.valueOf(((RawValue) ((POJONode) v).getPojo()).rawValue());
        }
        if (v.isBigDecimal()) return v.decimalValue().toString();
        if (!v.isNumber()) throw new IllegalArgumentException("not a float: " + v);
        return v.asText();
    }

    private static long checkedLong(JsonNode v, LogicalType t, long min, long max) {
        if (!v.isIntegralNumber()) throw bad(v, t);
        long l = v.longValue();
        if (l < min || l > max || !v.canConvertToLong()) throw bad(v, t);
        return l;
    }

    private static IllegalArgumentException bad(JsonNode v, LogicalType t) {
        return new IllegalArgumentException("value " + v + " does not fit " + t);
    }

    // ------------------------------------------------------------------ internal -> JSON value

    static JsonNode fromRow(RowData row, RowType type) {
        ObjectNode o = F.objectNode();
        for (int i = 0; i < type.getFieldCount(); i++) {
            LogicalType ft = type.getTypeAt(i);
            Object v = RowData.createFieldGetter(ft, i).getFieldOrNull(row);
            o.set(type.getFieldNames().get(i), fromInternal(v, ft));
        }
        return o;
    }

    static JsonNode fromInternal(Object v, LogicalType t) {
        if (v == null) {
            return F.nullNode();
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN:
                return F.booleanNode((Boolean) v);
            case TINYINT:
                return F.numberNode((Byte) v);
            case SMALLINT:
                return F.numberNode((Short) v);
            case INTEGER:
                return F.numberNode((Integer) v);
            case BIGINT:
                return F.numberNode((Long) v);
            case FLOAT: {
                float f = (Float) v;
                if (Float.isNaN(f) || Float.isInfinite(f) || (f == 0f && 1f / f < 0)) return F.textNode(Float.toString(f));
                return F.rawValueNode(new RawValue(Float.toString(f)));
            }
            case DOUBLE: {
                double d = (Double) v;
                if (Double.isNaN(d) || Double.isInfinite(d) || (d == 0d && 1d / d < 0)) return F.textNode(Double.toString(d));
                return F.rawValueNode(new RawValue(Double.toString(d)));
            }
            case DECIMAL:
                return F.textNode(((DecimalData) v).toBigDecimal().toPlainString());
            case CHAR:
            case VARCHAR:
                return F.textNode(v.toString());
            case BINARY:
            case VARBINARY:
                return F.textNode(Base64.getEncoder().encodeToString((byte[]) v));
            case DATE:
                return F.textNode(LocalDate.ofEpochDay((Integer) v).toString());
            case TIME_WITHOUT_TIME_ZONE:
                return F.textNode(formatTime((Integer) v, ((TimeType) t).getPrecision()));
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return F.textNode(formatTimestampPrecise((TimestampData) v, ((TimestampType) t).getPrecision(), false));
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return F.textNode(formatTimestampPrecise((TimestampData) v, ((LocalZonedTimestampType) t).getPrecision(), true));
            case ARRAY: {
                LogicalType et = ((ArrayType) t).getElementType();
                ArrayData a = (ArrayData) v;
                ArrayData.ElementGetter g = ArrayData.createElementGetter(et);
                ArrayNode out = F.arrayNode();
                for (int i = 0; i < a.size(); i++) out.add(fromInternal(g.getElementOrNull(a, i), et));
                return out;
            }
            case MAP: {
                MapType mt = (MapType) t;
                MapData m = (MapData) v;
                ArrayData.ElementGetter kg = ArrayData.createElementGetter(mt.getKeyType());
                ArrayData.ElementGetter vg = ArrayData.createElementGetter(mt.getValueType());
                ArrayNode out = F.arrayNode();
                ArrayData ks = m.keyArray(), vs = m.valueArray();
                for (int i = 0; i < m.size(); i++) {
                    ArrayNode pair = F.arrayNode();
                    pair.add(fromInternal(kg.getElementOrNull(ks, i), mt.getKeyType()));
                    pair.add(fromInternal(vg.getElementOrNull(vs, i), mt.getValueType()));
                    out.add(pair);
                }
                return out;
            }
            case ROW:
                return fromRow((RowData) v, (RowType) t);
            default:
                // e.g. RAW: not part of the golden table
                return F.textNode("<unsupported " + t + ">");
        }
    }

    /** HH:mm:ss plus exactly {@code precision} fraction digits (none for 0); internal TIME is millis of day. */
    static String formatTime(int millisOfDay, int precision) {
        LocalTime lt = LocalTime.ofNanoOfDay(millisOfDay * 1_000_000L);
        String base = String.format("%02d:%02d:%02d", lt.getHour(), lt.getMinute(), lt.getSecond());
        if (precision == 0) return base;
        String frac = String.format("%09d", lt.getNano());
        return base + "." + frac.substring(0, precision);
    }

    /** Strict form used to validate the hand-written spec: the value must not carry digits beyond the precision. */
    static String formatTimestamp(TimestampData ts, int precision, boolean utcZ) {
        int nanos = (utcZ ? ts.toInstant().getNano() : ts.toLocalDateTime().getNano());
        if (nanos % (int) Math.pow(10, 9 - precision) != 0) {
            throw new IllegalArgumentException("timestamp " + ts + " has digits beyond precision " + precision);
        }
        return formatTimestampPrecise(ts, precision, utcZ);
    }

    /**
     * yyyy-MM-ddTHH:mm:ss plus exactly {@code precision} fraction digits (digits beyond the precision are shown when
     * the value carries them, so nothing is hidden), plus 'Z' for TIMESTAMP_LTZ (UTC).
     */
    static String formatTimestampPrecise(TimestampData ts, int precision, boolean utcZ) {
        LocalDateTime ldt = utcZ ? LocalDateTime.ofInstant(ts.toInstant(), ZoneOffset.UTC) : ts.toLocalDateTime();
        String date = ldt.toLocalDate().toString();
        String base = date + "T" + String.format("%02d:%02d:%02d", ldt.getHour(), ldt.getMinute(), ldt.getSecond());
        String frac = String.format("%09d", ldt.getNano());
        int digits = precision;
        while (digits < 9 && !frac.substring(digits).matches("0*")) digits++;
        String out = digits == 0 ? base : base + "." + frac.substring(0, digits);
        return utcZ ? out + "Z" : out;
    }

    static List<String> names(JsonNode arr) {
        List<String> out = new ArrayList<>();
        for (JsonNode n : arr) out.add(n.textValue());
        return out;
    }
}
