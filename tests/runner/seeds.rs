//! Every DDL and DML statement of both seed documents parses verbatim (copied from ../shared/seeds/), and the
//! seed example jobs validate up to the missing Pulsar connector.

use crate::common;

use pulsar_connect::sql::{ColumnKind, Statement, TypeKind, parse_script};

/// 000_efdec293f8a52c28.txt, "用作数据源".
const VENDOR_SOURCE: &str = "CREATE TABLE pulsar_source (
    order_id bigint,
    order_product_id bigint,
    order_customer_id bigint,
    order_status varchar
 ) WITH (
     'connector' = 'pulsar',
     'topic' = 'persistent://public/default/topic82547611',
     'service-url' = 'pulsar://localhost:6650',
     'admin-url' = 'http://localhost:8080', 
     'auth-params' = 'token:{topic token}',
     'auth-plugin-classname'='org.apache.pulsar.client.impl.auth.AuthenticationToken',     
     'format' = 'json',
     'scan.startup.mode' = 'latest'
 );";

/// 000, "用作数据目的".
const VENDOR_SINK: &str = "CREATE TABLE pulsar_sink (
    order_id bigint,
    order_product_id bigint,
    order_customer_id bigint,
    order_status varchar
 ) WITH (
     'connector' = 'pulsar',
     'topic' = 'persistent://public/default/topic82547611',
     'service-url' = 'pulsar://localhost:6650',
     'admin-url' = 'http://localhost:8080', 
     'auth-params' = 'token:{topic token}',
     'auth-plugin-classname'='org.apache.pulsar.client.impl.auth.AuthenticationToken',     
     'format' = 'json',
     'scan.startup.mode' = 'latest'
 );";

/// 000, "示例代码" (the whole job).
const VENDOR_JOB: &str = "create table pulsar_table (
    order_id bigint,
    order_product_id bigint,
    order_customer_id bigint,
    order_status varchar
) WITH (
  'connector' = 'pulsar',
  'topic' = 'persistent://public/default/topic82547611',
  'service-url' = 'pulsar://localhost:6650',
  'admin-url' = 'http://localhost:8080', 
  'auth-params' = 'token:{topic token}',
  'auth-plugin-classname'='org.apache.pulsar.client.impl.auth.AuthenticationToken',    
  'format' = 'json',
  'scan.startup.mode' = 'latest'
);

create table print_sink (
    order_id bigint,
    order_product_id bigint,
    order_customer_id bigint,
    order_status varchar
) WITH (
  'connector' = 'print',
  'print-sample-ratio' = '1'
);

insert into print_sink
select * from pulsar_table;";

/// 001_deaf391a4dea8959.txt, Step.2 (the CREATE TABLE and both INSERTs, without semicolons, as on the page).
const INLONG_JOB: &str = "CREATE TABLE pulsar (
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
  'service-url' = 'pulsar://localhost:6650',
  'admin-url' = 'http://localhost:8080',
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
 ('data 3', 3, TIMESTAMP '2020-03-10 13:12:11.123', MAP['k31', 'v31', 'k32', 'v32'], 'key3', TRUE)";

#[test]
fn vendor_statements_parse_verbatim() {
    for sql in [VENDOR_SOURCE, VENDOR_SINK] {
        let s = parse_script(sql).unwrap();
        assert_eq!(s.len(), 1);
        let Statement::CreateTable(t) = &s[0] else {
            panic!()
        };
        assert_eq!(t.columns.len(), 4);
        assert_eq!(t.options.len(), 8);
        assert_eq!(
            t.options
                .iter()
                .find(|(k, _, _)| k == "auth-params")
                .unwrap()
                .1,
            "token:{topic token}"
        );
    }
    let s = parse_script(VENDOR_JOB).unwrap();
    assert_eq!(s.len(), 3);
    let Statement::Insert(i) = &s[2] else {
        panic!("{:?}", s[2])
    };
    assert_eq!(i.table, "print_sink");
    assert_eq!(i.query, "select * from pulsar_table");
}

#[test]
fn inlong_statements_parse_verbatim_without_semicolons() {
    let s = parse_script(INLONG_JOB).unwrap();
    assert_eq!(s.len(), 3, "{s:#?}");
    let Statement::CreateTable(t) = &s[0] else {
        panic!()
    };
    assert_eq!(t.columns.len(), 8);
    assert!(
        matches!(&t.columns[2].kind, ColumnKind::Metadata { key: None, is_virtual: false, ty } if ty.kind == TypeKind::Timestamp(3))
    );
    assert!(matches!(
        &t.columns[4].kind,
        ColumnKind::Metadata {
            is_virtual: true,
            ..
        }
    ));
    let Statement::Insert(a) = &s[1] else {
        panic!()
    };
    assert_eq!(a.table, "sink_table");
    let Statement::Insert(b) = &s[2] else {
        panic!()
    };
    assert_eq!(b.table, "pulsar");
    assert!(
        b.query.contains("MAP {'k11': 'v11', 'k12': 'v12'}"),
        "{}",
        b.query
    );
}

#[tokio::test]
async fn seed_examples_load_with_the_pulsar_connector() {
    // Needs the built-in formats in <workspace>/plugins (`cargo xtask build-plugins`).
    let root = common::workspace();
    for file in ["examples/vendor-seed.sql", "examples/inlong-seed.sql"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let (r, _) = common::registry();
        if let Err(errors) = pulsar_connect::job::load_text(&text, &r).await {
            panic!("{file}: {errors}");
        }
    }
}
