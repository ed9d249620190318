//! Rows → messages: the table's encoders (value, key) and router, and the metadata columns a row writes
//! (`properties`, `eventTime`).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Result, anyhow, bail};
use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use magnetar::OutgoingMessage;

use super::SinkSpec;
use crate::connectors::pulsar::metadata::write_columns;
use crate::plugins::messages::PropertyBatchBuilder;
use crate::plugins::{Encoded, Encoder, KeyBatchBuilder, Kind, Router};

pub(crate) struct Codecs {
    value: Encoder,
    key: Option<Encoder>,
    router: Option<Router>,
}

/// The table's encoders and router: plugins loaded (verified, compiled through the cache) and their
/// factories run with the table's row types and options.
pub(crate) fn make_codecs(spec: &SinkSpec) -> Result<Codecs> {
    let cfg = &spec.cfg;
    let ((value, _), key) = cfg.format_codecs(&spec.plugins, Encoder::new)?;
    let key = key.map(|(k, _)| k);
    let router =
        match &spec.router {
            Some((name, options)) => {
                let plugin = spec.plugins.load(name, Kind::Router)?;
                Some(Router::new(&plugin, options).map_err(|e| {
                    anyhow!("table '{}', option 'sink.message-router': {e}", cfg.table)
                })?)
            }
            None => None,
        };
    Ok(Codecs { value, key, router })
}

/// One encoded batch, ready to send: a message per row (value payload and metadata columns), the key
/// format's bytes and the partition of each row.
pub(super) struct Prepared {
    pub(super) messages: Vec<OutgoingMessage>,
    pub(super) keys: Option<Encoded>,
    pub(super) partitions: Option<Vec<u32>>,
}

pub(super) fn prepare(
    codecs: &mut Codecs,
    spec: &SinkSpec,
    batch: &RecordBatch,
    partitions: u32,
) -> Result<Prepared> {
    let cfg = &spec.cfg;
    let layout = &cfg.layout;
    let project = |cols: &[usize], schema: &SchemaRef| -> Result<RecordBatch> {
        let arrays: Vec<ArrayRef> = cols.iter().map(|&i| batch.column(i).clone()).collect();
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    };
    let value_batch = project(&layout.sink_value_columns, &layout.value_schema)?;
    let values = codecs
        .value
        .encode(&value_batch)
        .map_err(|e| anyhow!("table '{}': {e}", cfg.table))?;
    if let Some(e) = values.errors.first() {
        bail!(
            "table '{}': row {} cannot be written with format '{}': {}",
            cfg.table,
            e.index,
            cfg.value_format
                .as_ref()
                .map(|f| f.plugin.as_str())
                .unwrap_or("?"),
            e.reason
        );
    }
    let keys = match (&mut codecs.key, &layout.key_schema) {
        (Some(enc), Some(schema)) => {
            let kb = project(&layout.sink_key_columns, schema)?;
            let k = enc
                .encode(&kb)
                .map_err(|e| anyhow!("table '{}': {e}", cfg.table))?;
            if let Some(e) = k.errors.first() {
                bail!(
                    "table '{}': the key of row {} cannot be written: {}",
                    cfg.table,
                    e.index,
                    e.reason
                );
            }
            Some(k)
        }
        _ => None,
    };
    let mut messages: Vec<OutgoingMessage> = (0..batch.num_rows())
        .map(|i| OutgoingMessage::with_payload(values.payload(i).to_vec()))
        .collect();
    write_columns(layout, batch, &mut messages)?;
    let partitions = if partitions == 0 {
        None
    } else {
        let mut kb = KeyBatchBuilder::default();
        for i in 0..batch.num_rows() {
            kb.push(keys.as_ref().map(|k| k.payload(i)));
        }
        let router = codecs
            .router
            .as_mut()
            .ok_or_else(|| anyhow!("internal: no router for a partitioned topic"))?;
        let props = if router.wants_properties() {
            let mut pb = PropertyBatchBuilder::default();
            for m in &messages {
                let refs: Vec<(&str, &str)> = m
                    .properties
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                pb.push(&refs);
            }
            Some(pb.finish())
        } else {
            None
        };
        let routed = router
            .route(&kb.finish(), props.as_ref(), partitions)
            .map_err(|e| anyhow!("table '{}', option 'sink.message-router': {e}", cfg.table))?;
        Some(routed)
    };
    Ok(Prepared {
        messages,
        keys,
        partitions,
    })
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
