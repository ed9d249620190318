-- The vendor manual's sink table (用作数据目的), unchanged except for the service and admin URLs, fed with a few
-- order rows so that the consumer job (vendor-seed.sql, 'scan.startup.mode' = 'latest') has something to print.
-- `cargo xtask demo` runs both against a local broker with token authentication. See ../shared/seeds/000_*.txt.
CREATE TABLE pulsar_sink (
    order_id bigint,
    order_product_id bigint,
    order_customer_id bigint,
    order_status varchar
 ) WITH (
     'connector' = 'pulsar',
     'topic' = 'persistent://public/default/topic82547611',
     'service-url' = 'pulsar://127.0.0.1:6650',
     'admin-url' = 'http://127.0.0.1:8080', 
     'auth-params' = 'token:{topic token}',
     'auth-plugin-classname'='org.apache.pulsar.client.impl.auth.AuthenticationToken',     
     'format' = 'json',
     'scan.startup.mode' = 'latest'
 );

INSERT INTO pulsar_sink VALUES
  (1001, 501, 42, 'CREATED'),
  (1002, 502, 42, 'PAID'),
  (1003, 503, 7, 'CREATED'),
  (1004, 501, 9, 'SHIPPED'),
  (1005, 504, 7, 'CANCELLED'),
  (1006, 505, 13, 'CREATED'),
  (1007, 502, 42, 'SHIPPED'),
  (1008, 506, 21, 'PAID'),
  (1009, 507, 21, 'CREATED'),
  (1010, 501, 9, 'DELIVERED');
