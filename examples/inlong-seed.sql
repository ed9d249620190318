-- Apache InLong 1.5.0's Pulsar Extract Node example, unchanged except for the service and admin URLs (local
-- broker). The page omits the semicolons between statements; pulsar-connect accepts that as Flink's SQL client
-- does with one statement per paste. The page never declares `sink_table`; this file declares it (a print table)
-- at the end so that the job is complete. See ../shared/seeds/001_*.txt.
CREATE TABLE pulsar (
  `physical_1` STRING,
  `physical_2` INT,
  `eventTime` TIMESTAMP(3) METADATA,
  `properties` MAP<STRING, STRING> METADATA ,
  `topic` STRING METADATA VIRTUAL,
  `sequenceId` BIGINT METADATA VIRTUAL,
  `key` STRING ,
  `physical_3` BOOLEAN
) WITH (
  'connector' = 'pulsar-inlong',
  'topic' = 'persistent://public/default/topic82547611',
  'key.format' = 'raw',
  'key.fields' = 'key',
  'value.format' = 'avro',
  'service-url' = 'pulsar://127.0.0.1:6650',
  'admin-url' = 'http://127.0.0.1:8080',
  'scan.startup.mode' = 'earliest' 
)
INSERT INTO `sink_table` 
    SELECT 
    `physical_1` AS `physical_1`,
    `physical_2` AS `physical_2`
    FROM `pulsar`
INSERT INTO pulsar 
VALUES
 ('data 1', 1, TIMESTAMP '2020-03-08 13:12:11.123', MAP['k11', 'v11', 'k12', 'v12'], 'key1', TRUE),
 ('data 2', 2, TIMESTAMP '2020-03-09 13:12:11.123', MAP['k21', 'v21', 'k22', 'v22'], 'key2', FALSE),
 ('data 3', 3, TIMESTAMP '2020-03-10 13:12:11.123', MAP['k31', 'v31', 'k32', 'v32'], 'key3', TRUE)
CREATE TABLE sink_table (
  `physical_1` STRING,
  `physical_2` INT
) WITH (
  'connector' = 'print',
  'print-identifier' = 'sink_table'
);
