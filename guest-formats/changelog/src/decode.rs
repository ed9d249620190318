//! The decode loop of a changelog format: each message is read as Jackson's tree, its envelope
//! ([`Envelope`]) emits 0..n rows with their row kinds, and the outcome is Flink's:
//! - an empty payload (Flink: a null or empty message, a tombstone) gives no row: a skip;
//! - what Flink throws is `Corrupt <Name> JSON message '<message>'.` with the cause; with
//!   `ignore-parse-errors` the message is skipped instead, keeping the rows it emitted before;
//! - what Flink drops without a row (canal's `CREATE`, a database or table not included) is a skip.
//!
//! A skip is a row error whose reason starts with [`format_common::SKIPPED`] (the host counts it apart
//! from failures), as for the other formats. A row error never comes with rows of its message.

use format_common::{
    ConfigError, DecodedBatch, MessageBatch, RowType, skipped, slice_at, utf8_lossy_java,
};
use json_codec::{Decoder as JsonDecoder, JsonOptions, tree_decoder};

use crate::message::Message;
use crate::metadata::{MetaKey, output_row_type};
use crate::rows::Rows;
use crate::{Doc, MetaValue};

/// Why a message gives no (more) rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Flink throws: the message fails (`Corrupt <Name> JSON message`); with `ignore-parse-errors` it is
    /// skipped, and the rows it emitted before stay.
    Corrupt(String),
    /// Flink drops the message without a row or an error: a skip.
    Skip(String),
    /// A row Flink would emit has a NULL in a NOT NULL field, which a batch cannot hold: the message
    /// fails, whatever the options.
    NotNull(String),
}

impl Stop {
    /// Flink's `NullPointerException` on `what` (`"op" is null (NullPointerException)`).
    pub fn npe(what: &str) -> Stop {
        Stop::Corrupt(format!("{what} is null (NullPointerException)"))
    }
}

/// A changelog format's envelope.
pub trait Envelope {
    /// Flink's name of the format in its messages (`Debezium`, `Canal`, `Maxwell`).
    fn name(&self) -> &'static str;

    /// Reads the envelope of message `m` and emits its rows (and metadata), in Flink's order of checks.
    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop>;
}

/// A configured changelog decoder.
#[derive(Debug)]
pub struct Decoder<E> {
    envelope: E,
    json: JsonDecoder,
    /// The output row type: the row type's columns, then the metadata columns.
    rt: RowType,
    names: Vec<String>,
    /// The metadata keys asked for, in order.
    keys: Vec<&'static str>,
}

impl<E: Envelope> Decoder<E> {
    /// A decoder of rows of `physical` (the table's row type) with the metadata keys `resolved`
    /// (indexes into the format's `table`, in the order asked). `opts`: parsed, decoding rules applied.
    pub fn new(
        envelope: E,
        opts: JsonOptions,
        physical: &RowType,
        table: &[MetaKey],
        resolved: &[usize],
    ) -> Result<Decoder<E>, ConfigError> {
        format_common::validate_row_type(physical)?;
        let rt = output_row_type(physical, table, resolved);
        let json = tree_decoder(opts, &rt, physical.fields.len())?;
        Ok(Decoder {
            envelope,
            json,
            rt,
            names: physical.fields.iter().map(|f| f.name.clone()).collect(),
            keys: resolved.iter().map(|&k| table[k].key).collect(),
        })
    }

    /// A format crate's `decoder(options, row_type, keys)`: `options` (no prefix) checked against the
    /// shared ones and the format's `own`, the metadata `keys` resolved against its `table` (`format`:
    /// its name), then its envelope made.
    pub fn configure(
        format: &str,
        own: &[&str],
        table: &[MetaKey],
        options: &[(String, String)],
        physical: &RowType,
        keys: &[String],
        envelope: impl FnOnce() -> Result<E, ConfigError>,
    ) -> Result<Decoder<E>, ConfigError> {
        let opts = crate::options::decoding(crate::options::parse(options, own)?)?;
        let resolved = crate::metadata::resolve(format, table, keys)?;
        Decoder::new(envelope()?, opts, physical, table, &resolved)
    }

    /// The row type of decoded batches (the row type's columns, then the metadata columns).
    pub fn output_row_type(&self) -> &RowType {
        &self.rt
    }

    /// Decodes a batch: each message gives its rows (with their kinds), a skip or an error.
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let count = batch.count as usize;
        if batch.payload_offsets.len() < count + 1 {
            return Err(format!(
                "{} payload offsets for {count} messages",
                batch.payload_offsets.len()
            ));
        }
        let mut rows = Rows::new(&self.rt, count, batch.payloads.len());
        let mut scratch = None;
        let ignore = self.json.options().ignore_parse_errors;
        for index in 0..count {
            let payload = slice_at(&batch.payloads, &batch.payload_offsets, index);
            let index = index as u32;
            if payload.is_empty() {
                rows.fail(index, skipped("empty payload (a tombstone)"));
                continue;
            }
            let result = match Doc::read(payload) {
                Err(e) => Err(Stop::Corrupt(e)),
                Ok(doc) => {
                    let mut m = Message::new(
                        doc,
                        &self.json,
                        &mut rows,
                        &self.rt,
                        &mut scratch,
                        &self.names,
                        &self.keys,
                    );
                    let r = self.envelope.rows(&mut m);
                    let converted = m.meta.iter().any(|v| matches!(v, MetaValue::Json(_)));
                    if r.is_ok() && m.rows.pending() == 0 && converted {
                        m.check_metadata()
                    } else {
                        r
                    }
                }
            };
            match result {
                Ok(()) if rows.pending() > 0 => rows.commit(index),
                Ok(()) => rows.fail(index, skipped("the message holds no row")),
                Err(Stop::Skip(why)) => rows.fail(index, skipped(why)),
                Err(Stop::Corrupt(_)) if ignore && rows.pending() > 0 => rows.commit(index),
                Err(Stop::Corrupt(cause)) => {
                    let reason = corrupt(self.envelope.name(), payload, &cause);
                    rows.fail(index, if ignore { skipped(reason) } else { reason });
                }
                Err(Stop::NotNull(why)) => rows.fail(index, why),
            }
        }
        Ok(rows.finish())
    }
}

/// The longest message text quoted in an error.
const QUOTE_MAX: usize = 4096;

/// Flink's `Corrupt <name> JSON message '<message>'.` (the message as Java decodes it, cut after
/// [`QUOTE_MAX`] bytes) and the cause.
pub fn corrupt(name: &str, payload: &[u8], cause: &str) -> String {
    let mut text = Vec::new();
    utf8_lossy_java(&payload[..payload.len().min(QUOTE_MAX)], &mut text);
    let text = String::from_utf8_lossy(&text);
    let cut = if payload.len() > QUOTE_MAX {
        format!("... ({} bytes)", payload.len())
    } else {
        String::new()
    };
    format!("Corrupt {name} JSON message '{text}{cut}'. Caused by: {cause}")
}
