-- Pulsar (raw: the whole payload as one STRING column) -> blackhole.
-- The raw format takes exactly one physical column, so the 4-column rows cannot be declared; this reads the
-- same topic (e.g. the JSON order rows) as opaque UTF-8 text, which is what 'raw' costs.
-- Placeholders: ${SERVICE_URL}, ${TOPIC}, ${SUBSCRIPTION} (default flink-peer-raw-${RUN_ID}: a fresh durable subscription per run), ${CHECKPOINT_INTERVAL} (default 10 s).
SET 'execution.checkpointing.interval' = '${CHECKPOINT_INTERVAL:-10 s}';

CREATE TABLE orders_raw (
    payload STRING
) WITH (
    'connector' = 'pulsar',
    'service-url' = '${SERVICE_URL}',
    'topics' = '${TOPIC}',
    'source.subscription-name' = '${SUBSCRIPTION:-flink-peer-raw-${RUN_ID}}',
    'source.start.message-id' = 'earliest',
    'format' = 'raw',
    'raw.charset' = 'UTF-8'
);

CREATE TABLE sink_blackhole (
    payload STRING
) WITH (
    'connector' = 'blackhole'
);

INSERT INTO sink_blackhole SELECT * FROM orders_raw;
