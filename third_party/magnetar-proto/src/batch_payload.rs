// SPDX-License-Identifier: Apache-2.0
//
// pulsar-connect patch (see third_party/README.md): compressed batches.

//! Compression of batch bodies: decompressed before a batch is split into messages (consumer),
//! compressed as a whole when a batch is flushed (producer).
//!
//! A producer compresses a batch as a whole (the concatenated `SingleMessageMetadata` + payload
//! records), so the batch must be decompressed *before* it is split. This crate has no codecs (they
//! live in the runtime crate), so the runtime registers them with [`set_batch_decompressor`] and
//! [`set_batch_compressor`].

use std::sync::OnceLock;

use bytes::Bytes;

/// `(compression type as in pb::CompressionType, compressed bytes, uncompressed size) -> plain bytes`.
pub type BatchDecompressor = fn(i32, &[u8], usize) -> Result<Bytes, String>;

/// `(compression type as in pb::CompressionType, plain bytes) -> compressed bytes`.
pub type BatchCompressor = fn(i32, &[u8]) -> Result<Bytes, String>;

static DECOMPRESSOR: OnceLock<BatchDecompressor> = OnceLock::new();
static COMPRESSOR: OnceLock<BatchCompressor> = OnceLock::new();

/// Registers the codec used for compressed batches. The first registration wins; returns whether
/// this one was installed.
pub fn set_batch_decompressor(f: BatchDecompressor) -> bool {
    DECOMPRESSOR.set(f).is_ok()
}

/// Registers the codec the producer compresses with when a message asks this crate to compress it
/// (`metadata.compression` set on a producer opened without a codec; see
/// `ProducerState::queue_send`). The first registration wins; returns whether this one was installed.
pub fn set_batch_compressor(f: BatchCompressor) -> bool {
    COMPRESSOR.set(f).is_ok()
}

/// The plain batch body: `body` itself when it is not compressed.
pub(crate) fn plain_batch_body(
    compression: Option<i32>,
    uncompressed_size: Option<u32>,
    body: Bytes,
) -> Result<Bytes, String> {
    match compression {
        None | Some(0) => Ok(body),
        Some(kind) => {
            let f = DECOMPRESSOR.get().ok_or_else(|| {
                format!("compressed batch (compression type {kind}) but no batch decompressor is registered")
            })?;
            let size = uncompressed_size.map_or(body.len(), |s| s as usize);
            f(kind, &body, size)
        }
    }
}

/// `plain` compressed with codec `kind` (a `pb::CompressionType` other than NONE).
pub(crate) fn compress(kind: i32, plain: &[u8]) -> Result<Bytes, String> {
    let f = COMPRESSOR.get().ok_or_else(|| {
        format!("compression type {kind} requested but no batch compressor is registered")
    })?;
    f(kind, plain)
}
