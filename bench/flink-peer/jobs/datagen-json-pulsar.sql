-- datagen -> json -> Pulsar, key-hash routing, at-least-once. Also the way to pre-produce test data with Flink.
-- Placeholders: ${SERVICE_URL}, ${TOPIC}, ${FORMAT} (default json; avro to pre-produce the avro topic), ${ROWS} (default 200000), ${RATE} (rows/s, default 1000000000 = unthrottled),
-- ${CHECKPOINT_INTERVAL} (default 10 s).
SET 'execution.checkpointing.interval' = '${CHECKPOINT_INTERVAL:-10 s}';

CREATE TABLE gen (
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING
) WITH (
    'connector' = 'datagen',
    'number-of-rows' = '${ROWS:-200000}',
    'rows-per-second' = '${RATE:-1000000000}',
    'fields.order_id.kind' = 'sequence',
    'fields.order_id.start' = '1',
    'fields.order_id.end' = '${ROWS:-200000}',
    'fields.order_product_id.min' = '1',
    'fields.order_product_id.max' = '100000',
    'fields.order_customer_id.min' = '1',
    'fields.order_customer_id.max' = '1000000',
    'fields.order_status.length' = '8'
);

-- flink-connector-pulsar 4.1 always leaves key.fields out of the message value (it has no
-- 'value.fields-include'), so the key is a separate column: the value keeps the seed's 4 columns.
CREATE TABLE orders_out (
    order_key STRING,
    order_id BIGINT,
    order_product_id BIGINT,
    order_customer_id BIGINT,
    order_status STRING
) WITH (
    'connector' = 'pulsar',
    'service-url' = '${SERVICE_URL}',
    'topics' = '${TOPIC}',
    'format' = '${FORMAT:-json}',
    -- message key = order_id as text (raw STRING key); key-hash routing hashes it onto the partitions
    'key.format' = 'raw',
    'key.fields' = 'order_key',
    'sink.topic-routing-mode' = 'message-key-hash',
    'pulsar.sink.deliveryGuarantee' = 'at-least-once'
);

INSERT INTO orders_out
SELECT CAST(order_id AS STRING), order_id, order_product_id, order_customer_id, order_status FROM gen;
