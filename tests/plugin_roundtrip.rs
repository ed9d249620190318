//! Every Flink SQL type through the boundary and back: Arrow → WIT columns → the identity plugin
//! (columns → rows → payloads → rows → columns) → Arrow, compared batch to batch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, ListArray, MapArray, RecordBatch, StringArray,
    StructArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray,
    Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use pulsar_connect::plugins::columns::{from_columns, to_columns};
use pulsar_connect::plugins::model::RowKind;
use pulsar_connect::plugins::schema::{SQL_TYPE_KEY, arrow_schema, row_type_from_arrow};
use pulsar_connect::plugins::{
    Decoder, Encoder, HostConfig, MessageBatchBuilder, MessageRef, PluginDir, PluginHost,
};
use pulsar_connect_tests::guests::install;

const ROWS: usize = 5;

fn sql(field: Field, sql_type: &str) -> Field {
    field.with_metadata(HashMap::from([(
        SQL_TYPE_KEY.to_owned(),
        sql_type.to_owned(),
    )]))
}

fn nulls(valid: [bool; ROWS]) -> Option<NullBuffer> {
    Some(NullBuffer::from(valid.to_vec()))
}

/// A batch with a column of every type, nulls, nested types, extreme values and unicode.
fn every_type() -> RecordBatch {
    let utc: Option<Arc<str>> = Some(Arc::from("UTC"));
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    let mut add = |field: Field, array: ArrayRef| {
        fields.push(field);
        columns.push(array);
    };

    add(
        Field::new("bool", DataType::Boolean, true),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(false),
            None,
            Some(true),
            Some(false),
        ])),
    );
    add(
        Field::new("tinyint", DataType::Int8, false),
        Arc::new(Int8Array::from(vec![i8::MIN, -1, 0, 1, i8::MAX])),
    );
    add(
        Field::new("smallint", DataType::Int16, true),
        Arc::new(Int16Array::from(vec![
            Some(i16::MIN),
            None,
            Some(0),
            Some(7),
            Some(i16::MAX),
        ])),
    );
    add(
        Field::new("int", DataType::Int32, true),
        Arc::new(Int32Array::from(vec![
            Some(i32::MIN),
            Some(-1),
            None,
            Some(42),
            Some(i32::MAX),
        ])),
    );
    add(
        Field::new("bigint", DataType::Int64, false),
        Arc::new(Int64Array::from(vec![i64::MIN, -1, 0, 1 << 53, i64::MAX])),
    );
    add(
        Field::new("float", DataType::Float32, true),
        Arc::new(Float32Array::from(vec![
            Some(f32::MIN),
            Some(f32::MIN_POSITIVE),
            None,
            Some(f32::INFINITY),
            Some(f32::NEG_INFINITY),
        ])),
    );
    add(
        Field::new("double", DataType::Float64, true),
        Arc::new(Float64Array::from(vec![
            Some(f64::MAX),
            Some(-0.5),
            Some(f64::EPSILON),
            None,
            Some(f64::NEG_INFINITY),
        ])),
    );
    let max38 = 10i128.pow(38) - 1;
    add(
        Field::new("decimal38", DataType::Decimal128(38, 10), true),
        Arc::new(
            Decimal128Array::from(vec![Some(-max38), Some(max38), None, Some(0), Some(-1)])
                .with_precision_and_scale(38, 10)
                .unwrap(),
        ),
    );
    add(
        Field::new("decimal5", DataType::Decimal128(5, 2), false),
        Arc::new(
            Decimal128Array::from(vec![-99999, 99999, 1234, 0, -1])
                .with_precision_and_scale(5, 2)
                .unwrap(),
        ),
    );
    add(
        sql(Field::new("char5", DataType::Utf8, true), "CHAR(5)"),
        Arc::new(StringArray::from(vec![
            Some("abcde"),
            None,
            Some("  x  "),
            Some("ü    "),
            Some(""),
        ])),
    );
    add(
        sql(Field::new("varchar10", DataType::Utf8, true), "VARCHAR(10)"),
        Arc::new(StringArray::from(vec![
            Some("hello"),
            Some(""),
            None,
            Some("日本語"),
            Some("a\u{0}b"),
        ])),
    );
    add(
        Field::new("string", DataType::Utf8, false),
        Arc::new(StringArray::from(vec![
            "",
            "emoji 🦀🚀",
            "e\u{301}\u{200d}",
            "ключ значение",
            &"long ".repeat(500),
        ])),
    );
    add(
        sql(Field::new("binary4", DataType::Binary, true), "BINARY(4)"),
        Arc::new(BinaryArray::from(vec![
            Some(&[0u8, 1, 2, 3][..]),
            None,
            Some(&[255u8; 4][..]),
            Some(&[0u8; 4][..]),
            Some(&b"abcd"[..]),
        ])),
    );
    add(
        Field::new("bytes", DataType::Binary, true),
        Arc::new(BinaryArray::from(vec![
            Some(&b""[..]),
            Some(&[0u8, 0, 0][..]),
            None,
            Some(&[0xffu8, 0xfe][..]),
            Some(&[7u8; 300][..]),
        ])),
    );
    add(
        Field::new("date", DataType::Date32, true),
        Arc::new(Date32Array::from(vec![
            Some(i32::MIN),
            Some(-719_162),
            None,
            Some(0),
            Some(2_932_896),
        ])),
    );
    add(
        Field::new("time0", DataType::Time32(TimeUnit::Second), true),
        Arc::new(Time32SecondArray::from(vec![
            Some(0),
            Some(86_399),
            None,
            Some(1),
            Some(43_200),
        ])),
    );
    add(
        sql(
            Field::new("time1", DataType::Time32(TimeUnit::Millisecond), true),
            "TIME(1)",
        ),
        Arc::new(Time32MillisecondArray::from(vec![
            Some(0),
            Some(86_399_900),
            Some(100),
            None,
            Some(5),
        ])),
    );
    add(
        Field::new("time3", DataType::Time32(TimeUnit::Millisecond), false),
        Arc::new(Time32MillisecondArray::from(vec![0, 86_399_999, 1, 2, 3])),
    );
    add(
        Field::new("time6", DataType::Time64(TimeUnit::Microsecond), true),
        Arc::new(Time64MicrosecondArray::from(vec![
            Some(0),
            Some(86_399_999_999),
            None,
            Some(1),
            Some(2),
        ])),
    );
    add(
        Field::new("time9", DataType::Time64(TimeUnit::Nanosecond), true),
        Arc::new(Time64NanosecondArray::from(vec![
            Some(0),
            Some(86_399_999_999_999),
            None,
            Some(1),
            Some(2),
        ])),
    );
    add(
        Field::new("ts0", DataType::Timestamp(TimeUnit::Second, None), true),
        Arc::new(TimestampSecondArray::from(vec![
            Some(i64::MIN),
            Some(0),
            None,
            Some(-1),
            Some(i64::MAX),
        ])),
    );
    add(
        sql(
            Field::new(
                "ts2",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
            "TIMESTAMP(2)",
        ),
        Arc::new(TimestampMillisecondArray::from(vec![
            Some(1_700_000_000_120),
            None,
            Some(0),
            Some(-10),
            Some(1),
        ])),
    );
    add(
        Field::new(
            "ts3",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Arc::new(TimestampMillisecondArray::from(vec![
            i64::MIN,
            0,
            1_700_000_000_123,
            -1,
            i64::MAX,
        ])),
    );
    add(
        Field::new(
            "ts6",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Arc::new(TimestampMicrosecondArray::from(vec![
            Some(1),
            None,
            Some(0),
            Some(i64::MAX),
            Some(i64::MIN),
        ])),
    );
    add(
        Field::new("ts9", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Arc::new(TimestampNanosecondArray::from(vec![
            Some(i64::MAX),
            Some(1),
            None,
            Some(0),
            Some(-1),
        ])),
    );
    add(
        Field::new(
            "ltz3",
            DataType::Timestamp(TimeUnit::Millisecond, utc.clone()),
            true,
        ),
        Arc::new(
            TimestampMillisecondArray::from(vec![
                Some(0),
                None,
                Some(1_700_000_000_000),
                Some(-1),
                Some(i64::MAX),
            ])
            .with_timezone("UTC"),
        ),
    );
    add(
        sql(
            Field::new(
                "ltz7",
                DataType::Timestamp(TimeUnit::Nanosecond, utc.clone()),
                false,
            ),
            "TIMESTAMP_LTZ(7)",
        ),
        Arc::new(
            TimestampNanosecondArray::from(vec![0, 100, -100, i64::MAX - 7, 1])
                .with_timezone("UTC"),
        ),
    );

    // ARRAY<INT>: [1, NULL], NULL, [], [i32::MAX], [0, 0, 0]
    let item = Arc::new(Field::new("item", DataType::Int32, true));
    let values = Int32Array::from(vec![
        Some(1),
        None,
        Some(i32::MAX),
        Some(0),
        Some(0),
        Some(0),
    ]);
    let list = ListArray::new(
        item.clone(),
        OffsetBuffer::from_lengths([2, 0, 0, 1, 3]),
        Arc::new(values),
        nulls([true, false, true, true, true]),
    );
    add(
        Field::new("array_int", DataType::List(item), true),
        Arc::new(list),
    );

    // ARRAY<ARRAY<STRING>>: [["a", NULL], []], [], NULL, [NULL], [["ü"]]
    let leaf = Arc::new(Field::new("item", DataType::Utf8, true));
    let strings = StringArray::from(vec![Some("a"), None, Some("ü")]);
    let inner = ListArray::new(
        leaf.clone(),
        OffsetBuffer::from_lengths([2, 0, 0, 1]),
        Arc::new(strings),
        Some(NullBuffer::from(vec![true, true, false, true])),
    );
    let inner_field = Arc::new(Field::new("item", DataType::List(leaf), true));
    let outer = ListArray::new(
        inner_field.clone(),
        OffsetBuffer::from_lengths([2, 0, 0, 1, 1]),
        Arc::new(inner),
        nulls([true, true, false, true, true]),
    );
    add(
        Field::new("array_array", DataType::List(inner_field), true),
        Arc::new(outer),
    );

    // MAP<STRING, BIGINT>: {a: 1, b: NULL}, NULL, {}, {"ключ": MIN}, {"": MAX}
    let key = Field::new("key", DataType::Utf8, false);
    let value = Field::new("value", DataType::Int64, true);
    let kv = Fields::from(vec![key, value]);
    let entries = StructArray::new(
        kv.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", "b", "ключ", ""])),
            Arc::new(Int64Array::from(vec![
                Some(1),
                None,
                Some(i64::MIN),
                Some(i64::MAX),
            ])),
        ],
        None,
    );
    let entries_field = Arc::new(Field::new("entries", DataType::Struct(kv), false));
    let map = MapArray::new(
        entries_field.clone(),
        OffsetBuffer::from_lengths([2, 0, 0, 1, 1]),
        entries,
        nulls([true, false, true, true, true]),
        false,
    );
    add(
        Field::new("map", DataType::Map(entries_field, false), true),
        Arc::new(map),
    );

    // ROW<id INT NOT NULL, name STRING, tags ARRAY<ROW<x DOUBLE>>>, one row NULL.
    let x = Fields::from(vec![Field::new("x", DataType::Float64, true)]);
    let xs = StructArray::new(
        x.clone(),
        vec![Arc::new(Float64Array::from(vec![
            Some(1.5),
            None,
            Some(-2.0),
        ]))],
        None,
    );
    let tag_item = Arc::new(Field::new("item", DataType::Struct(x), true));
    let tags = ListArray::new(
        tag_item.clone(),
        OffsetBuffer::from_lengths([1, 0, 0, 2, 0]),
        Arc::new(xs),
        None,
    );
    let row_fields = Fields::from(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("tags", DataType::List(tag_item), true),
    ]);
    let row = StructArray::new(
        row_fields.clone(),
        vec![
            Arc::new(Int32Array::from(vec![1, 2, 0, 4, 5])),
            Arc::new(StringArray::from(vec![
                Some("one"),
                None,
                None,
                Some("🦀"),
                Some("five"),
            ])),
            Arc::new(tags),
        ],
        nulls([true, true, false, true, true]),
    );
    add(
        Field::new("row", DataType::Struct(row_fields), true),
        Arc::new(row),
    );

    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

#[test]
fn schema_survives_the_row_type() {
    let batch = every_type();
    let row_type = row_type_from_arrow(batch.schema_ref()).unwrap();
    assert_eq!(row_type.fields.len(), batch.num_columns());
    let back = arrow_schema(&row_type).unwrap();
    assert_eq!(&back, batch.schema_ref().as_ref());
}

#[test]
fn host_columns_round_trip_including_slices() {
    let batch = every_type();
    let schema = batch.schema();
    assert_eq!(
        from_columns(to_columns(&batch).unwrap(), &schema).unwrap(),
        batch
    );
    for (offset, len) in [(1, 3), (3, 2), (4, 1), (0, 0)] {
        let slice = batch.slice(offset, len);
        assert_eq!(
            from_columns(to_columns(&slice).unwrap(), &schema).unwrap(),
            slice,
            "slice {offset}+{len}"
        );
    }
}

#[test]
fn invalid_columns_from_a_plugin_are_rejected() {
    let batch = every_type();
    let schema: SchemaRef = batch.schema();
    let good = to_columns(&batch).unwrap();

    let mut bad = good.clone();
    bad.row_count += 1;
    assert!(from_columns(bad, &schema).is_err());

    let mut bad = good.clone();
    bad.columns.swap(1, 2);
    let err = from_columns(bad, &schema).unwrap_err();
    assert!(format!("{err:#}").contains("cannot hold"), "{err:#}");

    let mut bad = good.clone();
    bad.columns.push(bad.columns[0].clone());
    assert!(format!("{:#}", from_columns(bad, &schema).unwrap_err()).contains("not referenced"));

    // Invalid UTF-8 in a STRING column.
    let string_index = schema.index_of("string").unwrap();
    let mut bad = good.clone();
    if let pulsar_connect::plugins::model::ColumnData::Bytes(b) =
        &mut bad.columns[string_index].data
    {
        b.data[b.offsets[1] as usize] = 0xff;
    }
    assert!(from_columns(bad, &schema).is_err());

    // A child index pointing back at its parent (a cycle).
    let array_index = schema.index_of("array_int").unwrap();
    let mut bad = good;
    if let pulsar_connect::plugins::model::ColumnData::List(l) = &mut bad.columns[array_index].data
    {
        l.child = array_index as u32;
    }
    assert!(
        format!("{:#}", from_columns(bad, &schema).unwrap_err())
            .contains("children must come after")
    );
}

#[test]
fn every_type_round_trips_through_the_identity_plugin() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "identity");
    let host = PluginHost::new(HostConfig::default()).unwrap();
    let plugin = host
        .load(&PluginDir::open(dir.path()).unwrap(), "identity")
        .unwrap();

    let batch = every_type();
    let mut encoder = Encoder::new(&plugin, &[], batch.schema()).unwrap();
    let mut decoder = Decoder::new(&plugin, &[], batch.schema()).unwrap();

    let encoded = encoder.encode(&batch).unwrap();
    assert!(encoded.errors.is_empty(), "{:?}", encoded.errors);
    assert_eq!(encoded.len(), ROWS);

    // Feed the payloads back, plus one garbage message in the middle (a per-row error, not a failure).
    let mut messages = MessageBatchBuilder::new();
    for i in 0..ROWS {
        messages.push(MessageRef {
            payload: encoded.payload(i),
            ..Default::default()
        });
        if i == 2 {
            messages.push(MessageRef {
                payload: b"\x63garbage",
                key: Some(b"k"),
                ..Default::default()
            });
        }
    }
    let decoded = decoder.decode(messages.finish(false)).unwrap();
    assert_eq!(decoded.errors.len(), 1);
    assert_eq!(decoded.errors[0].index, 3);
    assert!(
        decoded.errors[0].reason.contains("unknown value tag 99"),
        "{:?}",
        decoded.errors
    );
    assert_eq!(decoded.row_messages(), vec![0, 1, 2, 4, 5]);
    assert_eq!(decoded.batch, batch);

    // Slices and an empty batch too.
    let slice = batch.slice(1, 3);
    let encoded = encoder.encode(&slice).unwrap();
    let mut messages = MessageBatchBuilder::new();
    for i in 0..encoded.len() {
        messages.push(MessageRef {
            payload: encoded.payload(i),
            ..Default::default()
        });
    }
    assert_eq!(decoder.decode(messages.finish(false)).unwrap().batch, slice);
    let empty = encoder.encode(&batch.slice(0, 0)).unwrap();
    assert!(empty.is_empty());
    assert_eq!(
        decoder
            .decode(MessageBatchBuilder::new().finish(false))
            .unwrap()
            .batch
            .num_rows(),
        0
    );

    let counters = plugin.counters();
    assert_eq!(counters.rows, (ROWS + ROWS + 3 + 3) as u64);
    assert_eq!(counters.row_errors, 1);
    assert_eq!(counters.traps, 0);
}

/// A plugin built against the frozen WIT 0.1.0 (the `passthrough` test guest generates its own 0.1.0
/// bindings, as a third-party plugin built before 0.2.0 did) loads and runs in one host next to a 0.2.0
/// plugin (`identity`, built with the SDK), each through its own bindings (ADR 0016).
#[test]
fn a_wit_0_1_0_plugin_runs_next_to_0_2_0_ones() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "passthrough");
    install(dir.path(), "identity");
    let host = PluginHost::new(HostConfig::default()).unwrap();
    let plugins = PluginDir::open(dir.path()).unwrap();
    let old = host.load(&plugins, "passthrough").unwrap();
    let new = host.load(&plugins, "identity").unwrap();
    assert!(old.manifest().world.ends_with("format@0.1.0"));
    assert!(new.manifest().world.ends_with("format@0.2.0"));

    let bytes = Arc::new(Schema::new(vec![Field::new("b", DataType::Binary, true)]));
    let mut old_decoder = Decoder::new(&old, &[], bytes.clone()).unwrap();
    let mut messages = MessageBatchBuilder::new();
    for payload in [&b"one"[..], b"two"] {
        messages.push(MessageRef {
            payload,
            ..Default::default()
        });
    }
    let decoded = old_decoder.decode(messages.finish(false)).unwrap();
    assert_eq!(decoded.batch.num_rows(), 2);
    assert_eq!(decoded.messages, None, "0.1.0: one row per message");
    assert_eq!(decoded.kinds, None, "0.1.0: inserts");
    // A 0.1.0 format has no readable metadata and writes inserts only.
    let Err(e) = Decoder::with_metadata(&old, &[], bytes.clone(), &["k".to_owned()]) else {
        panic!("a 0.1.0 format has no metadata");
    };
    assert!(
        format!("{e}").contains("no readable metadata key 'k'"),
        "{e}"
    );
    let mut old_encoder = Encoder::new(&old, &[], bytes).unwrap();
    let e = old_encoder
        .encode_changes(&decoded.batch, Some(&[RowKind::Insert, RowKind::Delete]))
        .unwrap_err();
    assert!(format!("{e}").contains("-D row"), "{e}");
    let encoded = old_encoder.encode(&decoded.batch).unwrap();
    assert_eq!(encoded.payload(1), b"two");

    let batch = every_type();
    let mut encoder = Encoder::new(&new, &[], batch.schema()).unwrap();
    let mut decoder = Decoder::new(&new, &[], batch.schema()).unwrap();
    // 0.2.0: an encoder gets the row kinds and may write no payload (a tombstone).
    let mut kinds = vec![RowKind::Insert; batch.num_rows()];
    kinds[1] = RowKind::Delete;
    let with_deletes = encoder.encode_changes(&batch, Some(&kinds)).unwrap();
    assert!(with_deletes.is_absent(1) && with_deletes.payload(1).is_empty());
    assert!(
        (0..batch.num_rows())
            .filter(|&i| i != 1)
            .all(|i| !with_deletes.is_absent(i))
    );
    let encoded = encoder.encode(&batch).unwrap();
    let mut messages = MessageBatchBuilder::new();
    for i in 0..encoded.len() {
        messages.push(MessageRef {
            payload: encoded.payload(i),
            ..Default::default()
        });
    }
    assert_eq!(decoder.decode(messages.finish(false)).unwrap().batch, batch);
}
