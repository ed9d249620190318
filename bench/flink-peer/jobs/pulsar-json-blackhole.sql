-- Pulsar (json, the seed's 4-column order rows) -> blackhole. Flink 1.18 + flink-connector-pulsar 4.1 option names.
-- Placeholders: ${SERVICE_URL}, ${TOPIC}, ${SUBSCRIPTION} (default flink-peer-${RUN_ID}: a fresh durable subscription per run), ${CHECKPOINT_INTERVAL} (default 10 s).
SET 'execution.checkpointing.interval' = '${CHECKPOINT_INTERVAL:-10 s}';

CREATE TABLE orders (
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING
) WITH (
    'connector' = 'pulsar',
    'service-url' = '${SERVICE_URL}',
    'topics' = '${TOPIC}',
    'source.subscription-name' = '${SUBSCRIPTION:-flink-peer-${RUN_ID}}',
    'source.start.message-id' = 'earliest',
    'format' = 'json'
);

CREATE TABLE sink_blackhole (
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING
) WITH (
    'connector' = 'blackhole'
);

INSERT INTO sink_blackhole SELECT * FROM orders;
