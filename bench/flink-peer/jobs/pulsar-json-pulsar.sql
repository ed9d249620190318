-- Pulsar (json) -> Pulsar (json), the input message's publish time copied into the output message's event time:
-- the latency job of `cargo xtask bench` (a probe on the output topic measures receive time - event time).
-- Placeholders: ${SERVICE_URL}, ${TOPIC} (input), ${OUT_TOPIC}, ${SUBSCRIPTION} (default flink-peer-${RUN_ID}),
-- ${START} (default latest), ${CHECKPOINT_INTERVAL} (default 10 s).
SET 'execution.checkpointing.interval' = '${CHECKPOINT_INTERVAL:-10 s}';

CREATE TABLE orders_in (
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING,
    publish_time TIMESTAMP_LTZ(3) METADATA FROM 'publish_time' VIRTUAL
) WITH (
    'connector' = 'pulsar',
    'service-url' = '${SERVICE_URL}',
    'topics' = '${TOPIC}',
    'source.subscription-name' = '${SUBSCRIPTION:-flink-peer-${RUN_ID}}',
    'source.start.message-id' = '${START:-latest}',
    'format' = 'json'
);

CREATE TABLE orders_out (
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING,
    event_time TIMESTAMP_LTZ(3) METADATA FROM 'event_time'
) WITH (
    'connector' = 'pulsar',
    'service-url' = '${SERVICE_URL}',
    'topics' = '${OUT_TOPIC}',
    'format' = 'json',
    'pulsar.sink.deliveryGuarantee' = 'at-least-once'
);

INSERT INTO orders_out SELECT order_id, order_product_id, order_customer_id, order_status, publish_time FROM orders_in;
