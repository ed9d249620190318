// SPDX-License-Identifier: Apache-2.0
//
// pulsar-connect patch 7 (third_party/README.md): compressed batches and byte keys in batches.

//! The producer compresses a batch body as a whole with the per-message codec (what every Pulsar
//! client reads), sends messages that leave the batch path compressed alone, keeps the base64 flag of
//! byte keys inside batches, and never batches payloads the runtime compressed one by one.
//!
//! The codec registered here is a stand-in (a tag byte and the bytes reversed): the tests check where
//! compression is applied and what the metadata says, not a real algorithm.

use std::time::Instant;

use bytes::{Buf, Bytes};
use magnetar_proto::batch_payload::{set_batch_compressor, set_batch_decompressor};
use magnetar_proto::pb;
use magnetar_proto::producer::{OutboundFrame, OutgoingMessage, ProducerState};
use magnetar_proto::types::{CompressionKind, ProducerHandle};
use prost::Message as _;

const LZ4: i32 = pb::CompressionType::Lz4 as i32;
const ZSTD: i32 = pb::CompressionType::Zstd as i32;

fn fake_compress(kind: i32, plain: &[u8]) -> Result<Bytes, String> {
    let mut out = vec![kind as u8];
    out.extend(plain.iter().rev());
    Ok(Bytes::from(out))
}

fn fake_decompress(kind: i32, data: &[u8], size: usize) -> Result<Bytes, String> {
    match data.split_first() {
        Some((tag, rest)) if i32::from(*tag) == kind && rest.len() == size => {
            Ok(Bytes::from(rest.iter().rev().copied().collect::<Vec<u8>>()))
        }
        _ => Err(format!("not compressed with {kind} to {size} bytes")),
    }
}

fn register() {
    set_batch_compressor(fake_compress);
    set_batch_decompressor(fake_decompress);
}

fn batching_producer(codec: CompressionKind) -> ProducerState {
    register();
    let mut p = ProducerState::new(ProducerHandle(1), "t".to_owned(), codec, 5 * 1024 * 1024);
    p.batching_enabled = true;
    p.max_messages_in_batch = 100;
    p.max_batch_size_bytes = 128 * 1024;
    p
}

fn message(payload: &str, key: &str, b64: bool, codec: Option<i32>) -> OutgoingMessage {
    OutgoingMessage {
        payload: Bytes::copy_from_slice(payload.as_bytes()),
        metadata: pb::MessageMetadata {
            partition_key: Some(key.to_owned()),
            partition_key_b64_encoded: b64.then_some(true),
            properties: vec![pb::KeyValue {
                key: "p".to_owned(),
                value: payload.to_owned(),
            }],
            compression: codec,
            ..Default::default()
        },
        uncompressed_size: payload.len() as u32,
        num_messages: 1,
        txn_id: None,
        source_message_id: None,
    }
}

fn frames(p: &mut ProducerState) -> Vec<OutboundFrame> {
    std::iter::from_fn(|| p.next_outbound_frame()).collect()
}

/// The records of a plain batch body: (single metadata, payload).
fn records(mut body: Bytes) -> Vec<(pb::SingleMessageMetadata, Bytes)> {
    let mut out = Vec::new();
    while body.remaining() >= 4 {
        let size = body.get_u32() as usize;
        let single = pb::SingleMessageMetadata::decode(body.split_to(size)).unwrap();
        let payload = body.split_to(single.payload_size as usize);
        out.push((single, payload));
    }
    assert!(body.is_empty(), "trailing bytes in the batch body");
    out
}

#[test]
fn a_batch_is_compressed_as_a_whole_with_the_body_size_as_uncompressed_size() {
    let mut p = batching_producer(CompressionKind::None);
    let now = Instant::now();
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        let b64 = i == 1;
        p.queue_send(message(text, &format!("k{i}"), b64, Some(LZ4)), 1, now)
            .unwrap();
    }
    assert_eq!(p.flush_batch(2, now), 1);
    let sent = frames(&mut p);
    assert_eq!(sent.len(), 1, "one entry for the batch");
    let meta = &sent[0].metadata;
    assert_eq!(meta.num_messages_in_batch, Some(3));
    assert_eq!(meta.compression, Some(LZ4));
    let size = meta.uncompressed_size.unwrap() as usize;
    let body = fake_decompress(LZ4, &sent[0].payload, size).expect("the body is compressed whole");
    assert_eq!(body.len(), size, "uncompressed_size is the body's size");
    let recs = records(body);
    let got: Vec<(&str, Option<bool>, &[u8])> = recs
        .iter()
        .map(|(s, payload)| {
            (
                s.partition_key.as_deref().unwrap(),
                s.partition_key_b64_encoded,
                payload.as_ref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("k0", None, &b"one"[..]),
            ("k1", Some(true), &b"two"[..]),
            ("k2", None, &b"three"[..]),
        ]
    );
    assert_eq!(recs[2].0.properties[0].value, "three");
}

#[test]
fn a_message_that_leaves_the_batch_path_is_compressed_alone() {
    let mut p = batching_producer(CompressionKind::None);
    let now = Instant::now();
    p.queue_send(message("batched", "a", false, Some(ZSTD)), 1, now)
        .unwrap();
    let mut delayed = message("delayed", "b", true, Some(ZSTD));
    delayed.metadata.deliver_at_time = Some(10_000);
    p.queue_send(delayed, 1, now).unwrap();
    let sent = frames(&mut p);
    assert_eq!(
        sent.len(),
        2,
        "the open batch, then the delayed message alone"
    );
    assert_eq!(sent[0].metadata.num_messages_in_batch, Some(1));
    let alone = &sent[1].metadata;
    assert_eq!(alone.num_messages_in_batch, None);
    assert_eq!(alone.compression, Some(ZSTD));
    assert_eq!(alone.uncompressed_size, Some(7));
    assert_eq!(alone.partition_key_b64_encoded, Some(true));
    assert_eq!(
        fake_decompress(ZSTD, &sent[1].payload, 7).unwrap(),
        Bytes::from_static(b"delayed")
    );
}

#[test]
fn a_message_with_another_codec_starts_a_new_batch() {
    let mut p = batching_producer(CompressionKind::None);
    let now = Instant::now();
    p.queue_send(message("x", "a", false, Some(LZ4)), 1, now)
        .unwrap();
    p.queue_send(message("y", "b", false, Some(LZ4)), 1, now)
        .unwrap();
    p.queue_send(message("z", "c", false, None), 1, now)
        .unwrap();
    p.flush_batch(2, now);
    let sent = frames(&mut p);
    assert_eq!(sent.len(), 2);
    assert_eq!(
        (
            sent[0].metadata.num_messages_in_batch,
            sent[0].metadata.compression
        ),
        (Some(2), Some(LZ4))
    );
    assert_eq!(
        (
            sent[1].metadata.num_messages_in_batch,
            sent[1].metadata.compression
        ),
        (Some(1), None)
    );
    let plain = records(sent[1].payload.clone());
    assert_eq!(plain[0].1, Bytes::from_static(b"z"));
    assert_eq!(
        sent[1].metadata.uncompressed_size,
        Some(sent[1].payload.len() as u32),
        "a plain batch: uncompressed_size is its body size"
    );
}

#[test]
fn payloads_compressed_by_the_runtime_are_never_batched() {
    // A producer-level codec: the runtime compressed each payload before it got here.
    let mut p = batching_producer(CompressionKind::Lz4);
    let now = Instant::now();
    for i in 0..3 {
        p.queue_send(message("c", &format!("k{i}"), false, None), 1, now)
            .unwrap();
    }
    p.flush_batch(2, now);
    let sent = frames(&mut p);
    assert_eq!(sent.len(), 3, "each message alone");
    for f in &sent {
        assert_eq!(f.metadata.num_messages_in_batch, None);
        assert_eq!(f.metadata.compression, Some(LZ4));
        assert_eq!(f.payload, Bytes::from_static(b"c"), "not compressed again");
    }
}

/// pulsar-connect patch 8: a message too big for the rest of the open batch flushes the batch first,
/// so the broker stores the messages in the order they were sent.
#[test]
fn a_message_that_does_not_fit_the_open_batch_does_not_overtake_it() {
    let mut p = batching_producer(CompressionKind::None);
    p.max_batch_size_bytes = 10;
    let now = Instant::now();
    for text in ["first-", "second", "third-"] {
        p.queue_send(message(text, "k", false, None), 1, now)
            .unwrap();
    }
    p.flush_batch(2, now);
    let sent = frames(&mut p);
    let order: Vec<Bytes> = sent
        .into_iter()
        .flat_map(|f| records(f.payload).into_iter().map(|(_, payload)| payload))
        .collect();
    assert_eq!(
        order,
        vec![
            Bytes::from_static(b"first-"),
            Bytes::from_static(b"second"),
            Bytes::from_static(b"third-")
        ]
    );
}
