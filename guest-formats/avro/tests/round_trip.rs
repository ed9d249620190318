//! Encode → decode is the identity for every type Flink's Avro schema takes.

use format_common::Value;
use format_common::golden;

#[test]
fn table_round_trips() {
    let file = golden::load("avro/default.json");
    let table = golden::load("table.json");
    let rt = golden::row_type(&golden::columns(&file));
    let rows: Vec<Vec<Value>> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| golden::to_row(&rt, &r["values"]).ok())
        // Avro maps cannot hold a NULL key (Flink fails those rows too).
        .filter(|r| !format!("{r:?}").contains("(Null, I32"))
        .collect();
    assert!(rows.len() > 15);
    let e = avro_format::encoder(&[], &rt).unwrap();
    let d = avro_format::decoder(&[], &rt).unwrap();
    let out = e.encode(&golden::batch(&rt, &rows)).unwrap();
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let payloads: Vec<&[u8]> = (0..rows.len()).map(|i| golden::payload(&out, i)).collect();
    let back = d.decode(&golden::messages(&payloads)).unwrap();
    assert!(back.errors.is_empty(), "{:?}", back.errors);
    for (g, r) in golden::rows(&rt, &back.rows).iter().zip(&rows) {
        assert!(golden::same_row(g, r), "\n{g:?}\n{r:?}");
    }
}

#[test]
fn malformed_input_errors_name_the_field() {
    let rt = golden::row_type(&[("id".into(), "INT".into()), ("s".into(), "STRING".into())]);
    let d = avro_format::decoder(&[], &rt).unwrap();
    let out = d
        .decode(&golden::messages(&[&[2, 4, 2, 9], &[2, 4, 2, 2, b'x', 0]]))
        .unwrap();
    assert_eq!(out.errors.len(), 2);
    assert!(out.errors[0].reason.contains("`s`"), "{:?}", out.errors);
    assert!(
        out.errors[1].reason.contains("trailing"),
        "{:?}",
        out.errors
    );
}
