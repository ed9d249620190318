package probe;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.serialization.SerializationSchema;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.format.DecodingFormat;
import org.apache.flink.table.connector.format.EncodingFormat;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkFunctionProvider;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.ScanTableSource;
import org.apache.flink.table.connector.source.SourceFunctionProvider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.factories.SerializationFormatFactory;
import org.apache.flink.table.runtime.connector.sink.SinkRuntimeProviderContext;
import org.apache.flink.table.runtime.connector.source.ScanRuntimeProviderContext;
import org.apache.flink.table.types.DataType;

import java.util.Collections;
import java.util.Set;

/**
 * A connector that handles its value format as the Pulsar connectors' factories do: a source discovers
 * and builds the decoding format, a sink the encoding format (runtime decoder/encoder included), and
 * every option, format options too, is validated by FactoryUtil.
 */
public class ProbeFactory implements DynamicTableSourceFactory, DynamicTableSinkFactory {

    @Override
    public String factoryIdentifier() {
        return "probe";
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Collections.singleton(FactoryUtil.FORMAT);
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return Collections.emptySet();
    }

    @Override
    public DynamicTableSource createDynamicTableSource(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        DecodingFormat<DeserializationSchema<RowData>> format =
                helper.discoverDecodingFormat(DeserializationFormatFactory.class, FactoryUtil.FORMAT);
        helper.validate();
        DataType physical = context.getCatalogTable().getResolvedSchema().toPhysicalRowDataType();
        format.createRuntimeDecoder(ScanRuntimeProviderContext.INSTANCE, physical);
        return new Source();
    }

    @Override
    public DynamicTableSink createDynamicTableSink(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        EncodingFormat<SerializationSchema<RowData>> format =
                helper.discoverEncodingFormat(SerializationFormatFactory.class, FactoryUtil.FORMAT);
        helper.validate();
        DataType physical = context.getCatalogTable().getResolvedSchema().toPhysicalRowDataType();
        format.createRuntimeEncoder(new SinkRuntimeProviderContext(false), physical);
        return new Sink();
    }

    static class Source implements ScanTableSource {
        @Override
        public ChangelogMode getChangelogMode() {
            return ChangelogMode.insertOnly();
        }

        @Override
        public ScanRuntimeProvider getScanRuntimeProvider(ScanContext context) {
            return SourceFunctionProvider.of(new Idle(), true);
        }

        @Override
        public DynamicTableSource copy() {
            return new Source();
        }

        @Override
        public String asSummaryString() {
            return "probe";
        }
    }

    static class Idle implements SourceFunction<RowData> {
        @Override
        public void run(SourceContext<RowData> ctx) {}

        @Override
        public void cancel() {}
    }

    static class Sink implements DynamicTableSink {
        @Override
        public ChangelogMode getChangelogMode(ChangelogMode requested) {
            return ChangelogMode.insertOnly();
        }

        @Override
        public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
            return SinkFunctionProvider.of(new DiscardingSink<>());
        }

        @Override
        public DynamicTableSink copy() {
            return new Sink();
        }

        @Override
        public String asSummaryString() {
            return "probe";
        }
    }
}
