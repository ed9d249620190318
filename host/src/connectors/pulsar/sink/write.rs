//! Rows → messages: the table's encoders (value, key) and router, and the metadata columns a row writes
//! (`properties`, `eventTime`).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Result, anyhow, bail};
use arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt8Array, UInt32Array};
use arrow::compute::{filter_record_batch, take_record_batch};
use arrow::datatypes::SchemaRef;
use magnetar::OutgoingMessage;

use super::SinkSpec;
use crate::connector_api::changelog::{self, RowKind};
use crate::connectors::pulsar::metadata::write_columns;
use crate::plugins::messages::PropertyBatchBuilder;
use crate::plugins::{Encoded, Encoder, KeyBatchBuilder, Kind, Router};

pub(crate) struct Codecs {
    value: Encoder,
    key: Option<Encoder>,
    router: Option<Router>,
}

impl Codecs {
    /// A checkpoint completed: newer versions of the plugins, if any are waiting, take the next batch
    /// (hot reload, ADR 0024).
    pub(crate) fn checkpoint_completed(&mut self) {
        self.value.checkpoint_completed();
        if let Some(key) = &mut self.key {
            key.checkpoint_completed();
        }
        if let Some(router) = &mut self.router {
            router.checkpoint_completed();
        }
    }
}

/// The table's encoders and router: plugins loaded (verified, compiled through the cache) and their
/// factories run with the table's row types and options.
pub(crate) fn make_codecs(spec: &SinkSpec) -> Result<Codecs> {
    let cfg = &spec.cfg;
    let ((value, _), key) =
        cfg.format_codecs(&spec.plugins, false, |p, o, s, _| Encoder::new(p, o, s))?;
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
    /// The messages that are tombstones (no value: an upsert table's deletes); empty when none is.
    pub(super) tombstones: Vec<bool>,
}

impl Prepared {
    pub(super) fn is_tombstone(&self, i: usize) -> bool {
        self.tombstones.get(i).copied().unwrap_or(false)
    }
}

/// An upsert table's messages (ADR 0016): which rows are written and whether each is a tombstone. `+I`/`+U`
/// write the key's value and `-D` a tombstone. A `-U` is dropped when the row after it is the `+U` of the
/// same key (the update's new value follows); otherwise the update moved the row to another key (or the
/// `+U` was filtered out) and the old key gets a tombstone, so no stale key stays behind. Stateless: the
/// rows of one update arrive together.
fn upsert_plan(kinds: Option<&UInt8Array>, keys: &Encoded, rows: usize) -> Vec<(usize, bool)> {
    let kind = |i: usize| changelog::kind_at(kinds, i);
    (0..rows)
        .filter_map(|i| match kind(i) {
            RowKind::Insert | RowKind::UpdateAfter => Some((i, false)),
            RowKind::Delete => Some((i, true)),
            RowKind::UpdateBefore => {
                let same_key_follows = i + 1 < rows
                    && kind(i + 1) == RowKind::UpdateAfter
                    && keys.payload(i) == keys.payload(i + 1);
                (!same_key_follows).then_some((i, true))
            }
        })
        .collect()
}

/// The key format's bytes of every row (`None` without a key format).
fn encode_keys(
    codecs: &mut Codecs,
    spec: &SinkSpec,
    batch: &RecordBatch,
) -> Result<Option<Encoded>> {
    let cfg = &spec.cfg;
    let layout = &cfg.layout;
    let (Some(enc), Some(schema)) = (&mut codecs.key, &layout.key_schema) else {
        return Ok(None);
    };
    let kb = project(batch, &layout.sink_key_columns, schema)?;
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
    Ok(Some(k))
}

/// The columns `cols` of `batch` as a batch of `schema`.
fn project(batch: &RecordBatch, cols: &[usize], schema: &SchemaRef) -> Result<RecordBatch> {
    let arrays: Vec<ArrayRef> = cols.iter().map(|&i| batch.column(i).clone()).collect();
    Ok(RecordBatch::try_new(schema.clone(), arrays)?)
}

pub(super) fn prepare(
    codecs: &mut Codecs,
    spec: &SinkSpec,
    batch: &RecordBatch,
    partitions: u32,
) -> Result<Prepared> {
    let cfg = &spec.cfg;
    let layout = &cfg.layout;
    let format_name = || {
        cfg.value_format
            .as_ref()
            .map(|f| f.plugin.as_str())
            .unwrap_or("?")
    };
    let mut keys = encode_keys(codecs, spec, batch)?;
    // An upsert table writes the rows of its plan: the others are dropped, its deletes are tombstones.
    let (batch, tombstones) = match (&keys, cfg.upsert) {
        (Some(k), true) => {
            let plan = upsert_plan(changelog::kinds(batch), k, batch.num_rows());
            let rows: Vec<usize> = plan.iter().map(|p| p.0).collect();
            let (data, _) = changelog::split(batch.clone())?;
            let idx = UInt32Array::from_iter_values(rows.iter().map(|&i| i as u32));
            keys = Some(k.select(&rows));
            (
                take_record_batch(&data, &idx)?,
                plan.iter().map(|p| p.1).collect(),
            )
        }
        (None, true) => bail!("internal: an upsert table without a key format"),
        _ => (batch.clone(), Vec::new()),
    };
    let mut value_batch = project(&batch, &layout.sink_value_columns, &layout.value_schema)?;
    if tombstones.contains(&true) {
        let keep: BooleanArray = tombstones.iter().map(|d| Some(!d)).collect();
        value_batch = filter_record_batch(&value_batch, &keep)?;
    }
    // Row kinds (ADR 0016) reach only a value format whose changelog-mode lists them (the planner checked);
    // an upsert table's rows are plain inserts to its value format.
    let kinds: Option<Vec<RowKind>> = changelog::kinds(&batch).map(|k| {
        (0..batch.num_rows())
            .map(|i| changelog::kind_at(Some(k), i))
            .collect()
    });
    let values = codecs
        .value
        .encode_changes(&value_batch, kinds.as_deref())
        .map_err(|e| anyhow!("table '{}': {e}", cfg.table))?;
    if let Some(e) = values.errors.first() {
        bail!(
            "table '{}': row {} cannot be written with format '{}': {}",
            cfg.table,
            e.index,
            format_name(),
            e.reason
        );
    }
    // Each row's message: an upsert delete has no value row; any other row takes the next value row,
    // whose payload may be absent (WIT 0.2.0: the format wrote no value, a tombstone too).
    let mut values_used = 0;
    let mut messages = Vec::with_capacity(batch.num_rows());
    let mut null_values = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        let deleted = tombstones.get(i).copied().unwrap_or(false);
        let payload = (!deleted).then(|| {
            values_used += 1;
            values_used - 1
        });
        match payload.filter(|&j| !values.is_absent(j)) {
            Some(j) => {
                messages.push(OutgoingMessage::with_payload(values.payload(j).to_vec()));
                null_values.push(false);
            }
            None => {
                messages.push(OutgoingMessage::default());
                null_values.push(true);
            }
        }
    }
    let tombstones = null_values;
    write_columns(layout, &batch, &mut messages)?;
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
        tombstones,
    })
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Encoded {
        let mut offsets = vec![0u32];
        let mut payloads = Vec::new();
        for key in k {
            payloads.extend_from_slice(key.as_bytes());
            offsets.push(payloads.len() as u32);
        }
        Encoded {
            payloads,
            offsets,
            absent: None,
            errors: Vec::new(),
        }
    }

    fn plan(kinds: &[RowKind], k: &[&str]) -> Vec<(usize, bool)> {
        let kinds = changelog::kinds_array(kinds);
        upsert_plan(kinds.as_ref(), &keys(k), k.len())
    }

    #[test]
    fn inserts_and_updates_write_values_and_deletes_write_tombstones() {
        use RowKind::*;
        assert_eq!(
            plan(&[Insert, UpdateAfter, Delete], &["1", "2", "3"]),
            vec![(0, false), (1, false), (2, true)]
        );
        assert_eq!(
            plan(&[Insert, Insert], &["1", "2"]),
            vec![(0, false), (1, false)]
        );
    }

    #[test]
    fn an_update_of_one_key_writes_only_its_new_value() {
        use RowKind::*;
        assert_eq!(
            plan(&[UpdateBefore, UpdateAfter, Delete], &["1", "1", "2"]),
            vec![(1, false), (2, true)]
        );
    }

    #[test]
    fn an_update_that_moves_a_row_to_another_key_deletes_the_old_key() {
        use RowKind::*;
        assert_eq!(
            plan(&[UpdateBefore, UpdateAfter], &["3", "4"]),
            vec![(0, true), (1, false)]
        );
        // A `-U` whose `+U` a filter dropped, and one at the end of the batch.
        assert_eq!(
            plan(&[UpdateBefore, Insert, UpdateBefore], &["5", "6", "7"]),
            vec![(0, true), (1, false), (2, true)]
        );
    }
}
