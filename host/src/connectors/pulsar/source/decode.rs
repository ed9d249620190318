//! Decoding a received batch: the value (and key) format plugins, then the table's columns in its layout
//! (key, value and metadata columns), on a blocking thread (plugin calls must not run on a runtime worker).

use anyhow::{Result, anyhow, bail};
use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use magnetar::proto::event::IncomingMessage;

use super::SourceSpec;
use crate::connector_api::changelog::{self, RowKind};
use crate::connectors::pulsar::config::FormatSpec;
use crate::connectors::pulsar::layout::{ColumnSource, Layout};
use crate::connectors::pulsar::metadata;
use crate::plugins::{Decoder, MessageBatchBuilder, MessageRef};
use crate::pulsar::message;
use crate::pulsar::message_id::format_message_id;
use crate::pulsar::reader::SplitCheckpoint;
use crate::pulsar::topics::Split;

/// The entries `msgs` end (whole entries: a batch's last member, or a message sent unbatched), as the
/// ids an individual acknowledgement of the entry takes.
fn entries_of(msgs: &[IncomingMessage]) -> Vec<magnetar::MessageId> {
    msgs.iter()
        .map(|m| m.message_id)
        .filter(|id| id.batch_index < 0 || id.batch_index + 1 >= id.batch_size)
        .map(|id| magnetar::MessageId {
            batch_index: -1,
            batch_size: -1,
            ..id
        })
        .collect()
}

pub(crate) struct Decoders {
    value: Decoder,
    value_spec: FormatSpec,
    key: Option<(Decoder, FormatSpec)>,
}

impl Decoders {
    /// A checkpoint completed: newer versions of the format plugins, if any are waiting, decode from the
    /// next batch on (hot reload, ADR 0024).
    pub(crate) fn checkpoint_completed(&mut self) {
        self.value.checkpoint_completed();
        if let Some((key, _)) = &mut self.key {
            key.checkpoint_completed();
        }
    }
}

/// One decoded batch and the split position after it.
pub(super) struct Decoded {
    pub(super) batch: RecordBatch,
    pub(super) split: String,
    pub(super) position: SplitCheckpoint,
    /// The last whole entry among the messages decoded (and every one before them on the split).
    pub(super) through: Option<magnetar::MessageId>,
    /// A subscription dispatching to several consumers: the entries of the messages decoded.
    pub(super) entries: Vec<magnetar::MessageId>,
    pub(super) skipped: u64,
}

/// The table's key and value decoders: plugins loaded (verified, compiled through the cache) and their
/// `create-decoder` factories run with the table's row types and options.
pub(crate) fn make_decoders(spec: &SourceSpec) -> Result<Decoders> {
    let cfg = &spec.cfg;
    let ((value, value_spec), key) =
        cfg.format_codecs(&spec.plugins, true, Decoder::with_metadata)?;
    Ok(Decoders {
        value,
        value_spec: value_spec.clone(),
        key: key.map(|(d, k)| (d, k.clone())),
    })
}

/// One row out of a decoded batch: its message, its value row (`None`: a tombstone) and its kind.
struct RowOut {
    message: usize,
    value: Option<u32>,
    kind: RowKind,
}

pub(super) struct DecodeJob {
    pub(super) table: String,
    pub(super) schema: SchemaRef,
    pub(super) layout: Layout,
    pub(super) split: Split,
    /// The reader's checkpoint key.
    pub(super) key: String,
    pub(super) position: SplitCheckpoint,
    /// The reader's last whole entry once these messages were handed out.
    pub(super) through: Option<magnetar::MessageId>,
    /// Whether to list the messages' entries (acknowledged one by one later).
    pub(super) list_entries: bool,
    /// `upsert-pulsar`: a value upserts its key (`+U`), a tombstone deletes it (`-D`).
    pub(super) upsert: bool,
    pub(super) msgs: Vec<IncomingMessage>,
}

impl DecodeJob {
    pub(super) fn run(self, mut decoders: Decoders) -> (Decoders, Result<Decoded>) {
        let out = self.decode(&mut decoders);
        (decoders, out)
    }

    /// The rows out, in message order: every value row (`row_messages`: the message of each) of a message
    /// that failed no format, and a delete per tombstone of an upsert table. Kinds: the format's (`kinds`),
    /// or `+U` for an upsert table's values.
    fn rows_out(
        &self,
        row_messages: &[usize],
        kinds: Option<&[RowKind]>,
        tombstone: &[bool],
        bad: &[bool],
    ) -> Vec<RowOut> {
        let mut out = Vec::with_capacity(row_messages.len());
        let mut r = 0;
        for i in 0..self.msgs.len() {
            if tombstone[i] && !bad[i] {
                out.push(RowOut {
                    message: i,
                    value: None,
                    kind: RowKind::Delete,
                });
            }
            while r < row_messages.len() && row_messages[r] == i {
                if !bad[i] {
                    let kind = match (self.upsert, kinds) {
                        (true, _) => RowKind::UpdateAfter,
                        (false, Some(k)) => k[r],
                        (false, None) => RowKind::Insert,
                    };
                    out.push(RowOut {
                        message: i,
                        value: Some(r as u32),
                        kind,
                    });
                }
                r += 1;
            }
        }
        out
    }

    fn failure(&self, i: usize, format: &str, reason: &str) -> anyhow::Error {
        let m = &self.msgs[i];
        anyhow!(
            "table '{}': cannot decode message {} of {} (partition {}) with format '{format}': {reason} (set '{format}.ignore-parse-errors' = 'true' to skip such messages)",
            self.table,
            format_message_id(&m.message_id),
            self.split.topic,
            self.split.partition
        )
    }

    /// Which messages a failed decode call had: the batch's first and last message id, and its largest
    /// message (a memory limit is usually crossed by that one).
    fn batch_context(&self) -> String {
        let (Some(first), Some(last)) = (self.msgs.first(), self.msgs.last()) else {
            return format!("no messages of {}", self.split.topic);
        };
        let largest = self
            .msgs
            .iter()
            .max_by_key(|m| m.payload.len())
            .unwrap_or(first);
        let range = if self.msgs.len() == 1 {
            format!("message {}", format_message_id(&first.message_id))
        } else {
            format!(
                "{} messages {} to {}",
                self.msgs.len(),
                format_message_id(&first.message_id),
                format_message_id(&last.message_id)
            )
        };
        format!(
            "{range} of {} (partition {}), the largest {} of {} bytes",
            self.split.topic,
            self.split.partition,
            format_message_id(&largest.message_id),
            largest.payload.len()
        )
    }

    fn decode(&self, decoders: &mut Decoders) -> Result<Decoded> {
        let n = self.msgs.len();
        // An upsert table's tombstones (no value, or an empty one) are deletes of their key: they go to no
        // value decoder.
        let tombstone: Vec<bool> = self
            .msgs
            .iter()
            .map(|m| self.upsert && (message::is_null_value(m) || m.payload.is_empty()))
            .collect();
        let valued: Vec<usize> = (0..n).filter(|&i| !tombstone[i]).collect();
        // Values.
        let mut values = MessageBatchBuilder::new();
        for m in valued.iter().map(|&i| &self.msgs[i]) {
            let payload: &[u8] = if message::is_null_value(m) {
                &[]
            } else {
                &m.payload
            };
            values.push(MessageRef {
                payload,
                key: None,
                properties: &[],
                event_time: message::event_time_ms(m).map(|t| t as i64),
            });
        }
        let value_decoded = decoders
            .value
            .decode(values.finish(false))
            .map_err(|e| anyhow!("table '{}': {e} ({})", self.table, self.batch_context()))?;
        let mut bad = vec![false; n];
        for e in &value_decoded.errors {
            let i = valued[e.index as usize];
            // A skip: the format drops the message itself (Flink returns no row, e.g. an empty JSON
            // payload); anything else is an error unless the user asked to skip those too.
            if !e.skip && !decoders.value_spec.skip_errors {
                return Err(self.failure(i, &decoders.value_spec.plugin, &e.reason));
            }
            bad[i] = true;
        }
        // The message of each value row: one each, or any number with a changelog format (ADR 0016).
        let row_messages: Vec<usize> = value_decoded
            .row_messages()
            .into_iter()
            .map(|m| valued[m as usize])
            .collect();
        // Keys: only messages that have one are decoded; the others get NULL key columns.
        let mut key_row: Vec<Option<u32>> = vec![None; n];
        let mut key_batch = None;
        if let Some((decoder, spec)) = &mut decoders.key {
            let mut keys = MessageBatchBuilder::new();
            let mut keyed = Vec::new();
            for (i, m) in self.msgs.iter().enumerate() {
                if let Some(k) = message::key_bytes(m) {
                    keys.push(MessageRef {
                        payload: &k,
                        key: None,
                        properties: &[],
                        event_time: None,
                    });
                    keyed.push(i);
                }
            }
            let decoded = decoder
                .decode(keys.finish(false))
                .map_err(|e| anyhow!("table '{}': {e} ({})", self.table, self.batch_context()))?;
            let mut failed = vec![false; keyed.len()];
            for e in &decoded.errors {
                let i = keyed[e.index as usize];
                if !e.skip && !spec.skip_errors {
                    return Err(self.failure(i, &format!("key {}", spec.plugin), &e.reason));
                }
                failed[e.index as usize] = true;
                bad[i] = true;
            }
            let mut r = 0u32;
            for (j, &i) in keyed.iter().enumerate() {
                if !failed[j] {
                    key_row[i] = Some(r);
                    r += 1;
                }
            }
            key_batch = Some(decoded.batch);
        }
        // A tombstone without a key deletes nothing: skipped.
        for i in 0..n {
            if tombstone[i] && key_row[i].is_none() {
                bad[i] = true;
            }
        }
        let skipped = bad.iter().filter(|b| **b).count() as u64;
        let out = self.rows_out(
            &row_messages,
            value_decoded.kinds.as_deref(),
            &tombstone,
            &bad,
        );
        let key_idx = UInt32Array::from(
            out.iter()
                .map(|r| key_row[r.message])
                .collect::<Vec<Option<u32>>>(),
        );
        let kinds: Vec<RowKind> = out.iter().map(|r| r.kind).collect();
        let topic = self.split.topic.as_str();
        let rows: Vec<metadata::Received<'_>> =
            out.iter().map(|r| (topic, &self.msgs[r.message])).collect();
        // Every message gave its one row (the usual batch): the value columns are taken as decoded;
        // otherwise they are taken in `out`'s order.
        let values_in_order = out.len() == value_decoded.batch.num_rows()
            && out
                .iter()
                .enumerate()
                .all(|(i, r)| r.value == Some(i as u32));
        let value_idx = (!values_in_order)
            .then(|| UInt32Array::from(out.iter().map(|r| r.value).collect::<Vec<_>>()));
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (c, field) in self.layout.source.iter().zip(self.schema.fields()) {
            let col = match c {
                ColumnSource::Value(v) => match &value_idx {
                    None => value_decoded.batch.column(*v).clone(),
                    Some(idx) => take(value_decoded.batch.column(*v), idx, None)?,
                },
                ColumnSource::Key(k) => match &key_batch {
                    Some(b) => take(b.column(*k), &key_idx, None)?,
                    None => bail!("internal: key column without a key format"),
                },
                ColumnSource::Metadata(key) => {
                    metadata::read_column(key, field.data_type(), &rows)?
                }
            };
            columns.push(col);
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| {
            anyhow!(
                "table '{}': rows read from {} do not fit the table's columns: {e} (a NOT NULL column got a NULL, e.g. a key column of a message without a key?)",
                self.table,
                self.split.topic
            )
        })?;
        let batch = changelog::attach(batch, changelog::kinds_array(&kinds))?;
        Ok(Decoded {
            batch,
            split: self.key.clone(),
            position: self.position.clone(),
            through: self.through,
            entries: if self.list_entries {
                entries_of(&self.msgs)
            } else {
                Vec::new()
            },
            skipped,
        })
    }
}
