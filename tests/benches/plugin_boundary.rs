//! The cost of the plugin boundary: a trivial format (`passthrough`: a payload is one BYTES value) at
//! 1, 64, 1024 and 8192 messages per batch, against the same work done natively (flat payload buffer
//! and offsets → Arrow `BinaryArray` → `RecordBatch`). The difference per message is the crossing cost:
//! lowering the message batch into guest memory, the call, lifting the columns back, validating them.
//!
//! Run: `CARGO_BUILD_BUILD_DIR=/work/build-shared cargo bench -p pulsar-connect-tests --bench plugin_boundary`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{BinaryArray, RecordBatch};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pulsar_connect::plugins::{
    Decoder, Encoder, HostConfig, MessageBatchBuilder, MessageRef, PluginDir, PluginHost, model,
};
use pulsar_connect_tests::guests::install;

const SIZES: [usize; 4] = [1, 64, 1024, 8192];
/// A typical small event.
const PAYLOAD_BYTES: usize = 142;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "payload",
        DataType::Binary,
        false,
    )]))
}

fn messages(n: usize) -> model::MessageBatch {
    let mut b = MessageBatchBuilder::new();
    for i in 0..n {
        let mut payload = vec![b'x'; PAYLOAD_BYTES];
        payload[..8].copy_from_slice(&(i as u64).to_le_bytes());
        b.push(MessageRef {
            payload: &payload,
            ..Default::default()
        });
    }
    b.finish(false)
}

/// The same decode natively: copy the payloads into one Arrow BinaryArray.
fn native_decode(schema: &SchemaRef, m: &model::MessageBatch) -> RecordBatch {
    let offsets: Vec<i32> = m.payload_offsets.iter().map(|&o| o as i32).collect();
    let array = BinaryArray::new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_slice_ref(&m.payloads),
        None,
    );
    RecordBatch::try_new(schema.clone(), vec![Arc::new(array)]).expect("valid batch")
}

/// The same encode natively: one payload buffer plus offsets out of the BinaryArray.
fn native_encode(batch: &RecordBatch) -> (Vec<u8>, Vec<u32>) {
    let a = batch
        .column(0)
        .as_any()
        .downcast_ref::<BinaryArray>()
        .expect("binary");
    (
        a.value_data().to_vec(),
        a.value_offsets().iter().map(|&o| o as u32).collect(),
    )
}

fn boundary(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    install(dir.path(), "passthrough");
    let host = PluginHost::new(HostConfig::default()).expect("host");
    let plugin = host
        .load(&PluginDir::open(dir.path()).expect("dir"), "passthrough")
        .expect("plugin");
    let schema = schema();
    let mut decoder = Decoder::new(&plugin, &[], schema.clone()).expect("decoder");
    let mut encoder = Encoder::new(&plugin, &[], schema.clone()).expect("encoder");

    let mut group = c.benchmark_group("decode");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        let m = messages(n);
        assert_eq!(
            decoder.decode(m.clone()).expect("decode").batch,
            native_decode(&schema, &m)
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("wasm", n), &m, |b, m| {
            // The batch moves into the call (as on the source's path); its copy is made outside the timing.
            b.iter_batched(
                || m.clone(),
                |m| black_box(decoder.decode(black_box(m)).expect("decode")),
                BatchSize::LargeInput,
            )
        });
        group.bench_with_input(BenchmarkId::new("native", n), &m, |b, m| {
            b.iter(|| black_box(native_decode(&schema, black_box(m))))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("encode");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for n in SIZES {
        let batch = native_decode(&schema, &messages(n));
        let encoded = encoder.encode(&batch).expect("encode");
        assert_eq!(
            (encoded.payloads.clone(), encoded.offsets.clone()),
            native_encode(&batch)
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("wasm", n), &batch, |b, batch| {
            b.iter(|| black_box(encoder.encode(black_box(batch)).expect("encode")))
        });
        group.bench_with_input(BenchmarkId::new("native", n), &batch, |b, batch| {
            b.iter(|| black_box(native_encode(black_box(batch))))
        });
    }
    group.finish();
}

criterion_group!(benches, boundary);
criterion_main!(benches);
