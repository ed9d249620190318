-- Pulsar quickstart: generated orders written to a Pulsar topic by the sink (json values, the product as
-- the key, key-hash routing) and read back from it by the source, printed — two INSERTs, one job.
--   cargo xtask broker start
--   pulsar-connect run examples/pulsar-quickstart.sql --state-dir /tmp/pc-quickstart
-- (with the URLs of `cargo xtask broker status`). Stop it with Ctrl-C; a restart continues both halves
-- from the last checkpoint.
SET 'pipeline.name' = 'pulsar-quickstart';
SET 'execution.checkpointing.interval' = '2s';

CREATE TABLE generated (
  order_id BIGINT NOT NULL,
  product STRING,
  quantity INT
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '100',
  'number-of-rows' = '200',
  'fields.order_id.kind' = 'sequence',
  'fields.order_id.start' = '1',
  'fields.order_id.end' = '200',
  'fields.product.length' = '6',
  'fields.quantity.min' = '1',
  'fields.quantity.max' = '5'
);

CREATE TABLE orders (
  order_id BIGINT,
  product STRING,
  quantity INT,
  published TIMESTAMP_LTZ(3) METADATA FROM 'publishTime' VIRTUAL
) WITH (
  'connector' = 'pulsar',
  'topic' = 'persistent://public/default/quickstart-orders',
  'service-url' = 'pulsar://127.0.0.1:6650',
  'admin-url' = 'http://127.0.0.1:8080',
  'format' = 'json',
  'key.format' = 'raw',
  'key.fields' = 'product',
  'sink.message-router' = 'key-hash',
  'scan.startup.mode' = 'earliest'
);

CREATE TABLE printed (
  order_id BIGINT,
  product STRING,
  quantity INT
) WITH (
  'connector' = 'print',
  'print-identifier' = 'orders'
);

INSERT INTO orders SELECT order_id, product, quantity FROM generated;

INSERT INTO printed SELECT order_id, product, quantity FROM orders;
