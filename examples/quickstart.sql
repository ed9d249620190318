-- Quickstart: generated orders, filtered and reshaped with SQL, printed to stdout.
--   pulsar-connect run examples/quickstart.sql --state-dir /tmp/pc-state
-- Stop it with Ctrl-C: it drains, takes a final checkpoint and exits 0; run it again to continue the sequence.
SET 'pipeline.name' = 'quickstart';
SET 'execution.checkpointing.interval' = '5s';

CREATE TABLE orders (
  order_id BIGINT NOT NULL,
  product STRING,
  quantity INT,
  price DECIMAL(10, 2),
  created TIMESTAMP(3),
  total AS quantity * price            -- a computed column
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '5',
  'number-of-rows' = '1000',
  'fields.order_id.kind' = 'sequence',
  'fields.order_id.start' = '1',
  'fields.order_id.end' = '1000000',
  'fields.product.length' = '8',
  'fields.quantity.min' = '1',
  'fields.quantity.max' = '5',
  'fields.price.min' = '1',
  'fields.price.max' = '100'
);

CREATE TABLE big_orders (
  order_id BIGINT,
  product STRING,
  total DECIMAL(12, 2),
  created TIMESTAMP(3)
) WITH (
  'connector' = 'print',
  'print-identifier' = 'big'
);

INSERT INTO big_orders
SELECT order_id, UPPER(product), total, created
FROM orders
WHERE total > 100;
