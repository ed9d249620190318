//! A batch of several canal-json messages: the message and kind of every row, skips and errors, and
//! the encoder's envelopes by row kind.

use format_common::golden::{batch, messages, payload, row_type, rows};
use format_common::{RowKind, SKIPPED, Value};

fn products(id: &str) -> format_common::RowType {
    row_type(&[
        ("id".to_owned(), id.to_owned()),
        ("name".to_owned(), "STRING".to_owned()),
    ])
}

#[test]
fn messages_kinds_skips_and_errors() {
    let rt = products("INT");
    let options = [("ignore-parse-errors".to_owned(), "false".to_owned())];
    let d = canal_json_format::decoder(&options, &rt, &["table".to_owned()]).unwrap();
    let inputs: [&[u8]; 6] = [
        br#"{"data":[{"id":1,"name":"a"},{"id":2,"name":"b"}],"old":[{"name":"x"},{"id":3}],"type":"UPDATE","table":"t"}"#,
        b"",
        br#"{"data":[{"id":"4"}],"type":"INSERT"}"#,
        br#"{"data":[{"id":5}],"type":"ALTER","table":"t"}"#,
        br#"{"data":null,"type":"CREATE"}"#,
        br#"{"data":[{"id":6}],"type":"DELETE","table":"u"}"#,
    ];
    let out = d.decode(&messages(&inputs)).unwrap();
    assert_eq!(out.messages.as_deref(), Some(&[0, 0, 0, 0, 2, 5][..]));
    assert_eq!(
        out.kinds.as_deref(),
        Some(
            &[
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::Insert,
                RowKind::Delete
            ][..]
        )
    );
    let errors: Vec<(u32, bool)> = out
        .errors
        .iter()
        .map(|e| (e.index, e.reason.starts_with(SKIPPED)))
        .collect();
    assert_eq!(errors, [(1, true), (3, false), (4, true)]);
    assert!(out.errors[1].reason.starts_with(
        r#"Corrupt Canal JSON message '{"data":[{"id":5}],"type":"ALTER","table":"t"}'."#
    ));
    let t = Value::String("t".into());
    let s = |v: &str| Value::String(v.into());
    assert_eq!(
        rows(d.output_row_type(), &out.rows),
        [
            // `old` names `name` and (in its other element) `id`: neither is copied from `data`.
            vec![Value::Null, s("x"), t.clone()],
            vec![Value::I32(1), s("a"), t.clone()],
            vec![Value::I32(3), Value::Null, t.clone()],
            vec![Value::I32(2), s("b"), t],
            vec![Value::I32(4), Value::Null, Value::Null],
            vec![Value::I32(6), Value::Null, s("u")],
        ]
        .map(|r| r.to_vec())
    );
}

#[test]
fn one_row_each_needs_no_messages_and_inserts_no_kinds() {
    let rt = products("INT NOT NULL");
    let d = canal_json_format::decoder(&[], &rt, &[]).unwrap();
    let out = d
        .decode(&messages(&[
            br#"{"data":[{"id":1}],"type":"INSERT"}"#,
            b"not json",
            br#"{"data":[{"id":2}],"type":"INSERT"}"#,
        ]))
        .unwrap();
    assert_eq!((out.messages, out.kinds), (None, None));
    assert_eq!(out.rows.row_count, 2);
    assert_eq!(out.errors.len(), 1);
}

#[test]
fn a_null_in_a_not_null_column_fails_the_message() {
    // Flink passes `-U` with `id` NULL on (the `old` quirk); a batch cannot hold it.
    let d = canal_json_format::decoder(&[], &products("INT NOT NULL"), &[]).unwrap();
    let out = d
        .decode(&messages(&[
            br#"{"data":[{"id":1},{"id":2}],"old":[{"name":"x"},{"id":3}],"type":"UPDATE"}"#,
        ]))
        .unwrap();
    assert_eq!(out.rows.row_count, 0);
    assert!(
        out.errors[0]
            .reason
            .starts_with("NULL in NOT NULL field `id` (-U)")
    );
}

#[test]
fn encoder_writes_inserts_and_deletes() {
    let rt = products("INT NOT NULL");
    let e = canal_json_format::encoder(&[], &rt).unwrap();
    let b = batch(
        &rt,
        &[
            vec![Value::I32(1), Value::String("a".into())],
            vec![Value::I32(2), Value::Null],
        ],
    );
    let out = e
        .encode(&b, Some(&[RowKind::UpdateBefore, RowKind::UpdateAfter]))
        .unwrap();
    assert_eq!(out.absent, None);
    assert_eq!(
        payload(&out, 0),
        br#"{"data":[{"id":1,"name":"a"}],"type":"DELETE"}"#
    );
    assert_eq!(
        payload(&out, 1),
        br#"{"data":[{"id":2,"name":null}],"type":"INSERT"}"#
    );
    let inserts = e.encode(&b, None).unwrap();
    assert!(payload(&inserts, 0).ends_with(br#""type":"INSERT"}"#));
    assert!(e.encode(&b, Some(&[RowKind::Insert])).is_err());
}

#[test]
fn metadata_is_converted_without_rows() {
    let rt = products("INT");
    let m: &[u8] = br#"{"data":[],"type":"INSERT","ts":"soon"}"#;
    let d = canal_json_format::decoder(&[], &rt, &["ingestion-timestamp".to_owned()]).unwrap();
    let out = d.decode(&messages(&[m])).unwrap();
    assert!(
        !out.errors[0].reason.starts_with(SKIPPED),
        "{:?}",
        out.errors
    );
    let d = canal_json_format::decoder(&[], &rt, &[]).unwrap();
    let out = d.decode(&messages(&[m])).unwrap();
    assert!(
        out.errors[0].reason.starts_with(SKIPPED),
        "{:?}",
        out.errors
    );
    let d = canal_json_format::decoder(&[], &rt, &["sql-type".to_owned()]).unwrap();
    let out = d
        .decode(&messages(&[
            br#"{"data":[],"type":"INSERT","sqlType":{"id":"int"}}"#,
        ]))
        .unwrap();
    assert!(
        !out.errors[0].reason.starts_with(SKIPPED),
        "{:?}",
        out.errors
    );
}

#[test]
fn include_patterns_match_whole_names() {
    let rt = products("INT");
    let o = |db: &str| vec![("database.include".to_owned(), db.to_owned())];
    assert!(canal_json_format::decoder(&o("(inventory"), &rt, &[]).is_err());
    let d = canal_json_format::decoder(&o("inv|shop"), &rt, &[]).unwrap();
    let out = d
        .decode(&messages(&[
            br#"{"data":[{"id":1}],"type":"INSERT","database":"inv"}"#,
            br#"{"data":[{"id":1}],"type":"INSERT","database":"inventory"}"#,
            br#"{"data":"broken","type":"INSERT","database":"shopping"}"#,
            br#"{"data":[{"id":1}],"type":"INSERT"}"#,
        ]))
        .unwrap();
    assert_eq!(out.rows.row_count, 1);
    let errors: Vec<(u32, bool)> = out
        .errors
        .iter()
        .map(|e| (e.index, e.reason.starts_with(SKIPPED)))
        .collect();
    assert_eq!(errors, [(1, true), (2, true), (3, false)]);
}
