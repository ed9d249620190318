package io.pulsarconnect.golden;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.DynamicTableFactory;
import org.apache.flink.table.factories.SerializationFormatFactory;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.utils.TypeConversions;
import org.apache.flink.util.SimpleUserCodeClassLoader;

import java.lang.reflect.Proxy;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * Creates Flink's runtime encoders/decoders exactly as the SQL planner does: through the format factory
 * ({@code createEncodingFormat(context, formatOptions)} then {@code createRuntimeEncoder(context, physicalType)}),
 * with the format options given without their {@code <format>.} prefix, as FactoryUtil hands them over.
 */
final class Flink {
    private Flink() {}

    static final ClassLoader CL = Flink.class.getClassLoader();

    /** 'json.timestamp-format.standard' -> 'timestamp-format.standard' */
    static Configuration formatOptions(String format, Map<String, String> sqlOptions) {
        Map<String, String> m = new LinkedHashMap<>();
        String prefix = format + ".";
        for (Map.Entry<String, String> e : sqlOptions.entrySet()) {
            if (!e.getKey().startsWith(prefix)) throw new IllegalArgumentException("option " + e.getKey() + " is not a " + format + " option");
            m.put(e.getKey().substring(prefix.length()), e.getValue());
        }
        return Configuration.fromMap(m);
    }

    static SerializationSchema<RowData> encoder(SerializationFormatFactory f, String format, Map<String, String> sqlOptions, RowType rowType) throws Exception {
        DataType dt = TypeConversions.fromLogicalToDataType(rowType);
        SerializationSchema<RowData> s = f.createEncodingFormat(factoryContext(), formatOptions(format, sqlOptions)).createRuntimeEncoder(sinkContext(), dt);
        s.open(initContext(SerializationSchema.InitializationContext.class));
        return s;
    }

    static DeserializationSchema<RowData> decoder(DeserializationFormatFactory f, String format, Map<String, String> sqlOptions, RowType rowType) throws Exception {
        DataType dt = TypeConversions.fromLogicalToDataType(rowType);
        DeserializationSchema<RowData> d = f.createDecodingFormat(factoryContext(), formatOptions(format, sqlOptions)).createRuntimeDecoder(sourceContext(), dt);
        d.open(initContext(DeserializationSchema.InitializationContext.class));
        return d;
    }

    @SuppressWarnings("unchecked")
    static <T> T initContext(Class<T> iface) {
        return (T) Proxy.newProxyInstance(CL, new Class<?>[] {iface}, (p, m, a) -> {
            switch (m.getName()) {
                case "getMetricGroup": return new UnregisteredMetricsGroup();
                case "getUserCodeClassLoader": return SimpleUserCodeClassLoader.create(CL);
                default: throw new UnsupportedOperationException("InitializationContext." + m.getName());
            }
        });
    }

    static DynamicTableFactory.Context factoryContext() {
        return (DynamicTableFactory.Context) Proxy.newProxyInstance(CL, new Class<?>[] {DynamicTableFactory.Context.class}, (p, m, a) -> {
            switch (m.getName()) {
                case "getClassLoader": return CL;
                case "getConfiguration": return new Configuration();
                case "isTemporary": return false;
                default: throw new UnsupportedOperationException("DynamicTableFactory.Context." + m.getName());
            }
        });
    }

    static DynamicTableSink.Context sinkContext() {
        return (DynamicTableSink.Context) Proxy.newProxyInstance(CL, new Class<?>[] {DynamicTableSink.Context.class}, (p, m, a) -> {
            switch (m.getName()) {
                case "isBounded": return false;
                case "getTargetColumns": return Optional.empty();
                case "createTypeInformation": return typeInfo(a[0]);
                default: throw new UnsupportedOperationException("DynamicTableSink.Context." + m.getName());
            }
        });
    }

    static DynamicTableSource.Context sourceContext() {
        return (DynamicTableSource.Context) Proxy.newProxyInstance(CL, new Class<?>[] {DynamicTableSource.Context.class}, (p, m, a) -> {
            switch (m.getName()) {
                case "createTypeInformation": return typeInfo(a[0]);
                default: throw new UnsupportedOperationException("DynamicTableSource.Context." + m.getName());
            }
        });
    }

    private static Object typeInfo(Object arg) {
        LogicalType t = arg instanceof DataType ? ((DataType) arg).getLogicalType() : (LogicalType) arg;
        return InternalTypeInfo.of(t);
    }
}
