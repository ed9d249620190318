//! Format plugins: configured decoders (messages → Arrow) and encoders (Arrow → payloads).

use anyhow::{anyhow, ensure};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::bindings::FormatInstance;
use super::columns::{from_columns, to_columns};
use super::error::{Failure, Phase, PluginError, Result};
use super::instance::{Configure, Instance};
use super::loader::{Plugin, PluginShared, Pre};
use super::manifest::Kind;
use super::model::{ConfigError, MessageBatch, RowError, RowKind, RowType};
use super::reload::VersionId;
use super::schema::row_type_from_arrow;
use super::state::PluginState;
use crate::sql::ChangelogMode;

/// The rows decoded from a message batch, in message order: the decoder's columns (the row type's, then
/// the metadata columns it was asked for).
#[derive(Debug, Clone)]
pub struct Decoded {
    pub batch: RecordBatch,
    /// The message of each row, ascending (a message may give several rows or none; checked). `None`: one
    /// row per message not in `errors`.
    pub messages: Option<Vec<u32>>,
    /// The kind of each row (checked against the manifest's `changelog-mode`). `None`: inserts only.
    pub kinds: Option<Vec<RowKind>>,
    pub errors: Vec<RowError>,
}

impl Decoded {
    /// The message index of each row of `batch`.
    pub fn row_messages(&self) -> Vec<u32> {
        if let Some(m) = &self.messages {
            return m.clone();
        }
        let total = self.batch.num_rows() as u32 + self.errors.len() as u32;
        let mut bad = self.errors.iter().map(|e| e.index).peekable();
        (0..total)
            .filter(|i| {
                if bad.peek() == Some(i) {
                    bad.next();
                    false
                } else {
                    true
                }
            })
            .collect()
    }
}

/// Payloads encoded from a row batch, one per row; rows in `errors` have an empty payload, rows marked in
/// `absent` none at all (a tombstone: a message without a value).
#[derive(Debug, Clone)]
pub struct Encoded {
    pub payloads: Vec<u8>,
    pub offsets: Vec<u32>,
    pub absent: Option<Vec<u8>>,
    pub errors: Vec<RowError>,
}

impl Encoded {
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload of row `i`.
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.payloads[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The payloads of `rows` (in that order), as if only they had been encoded. Row errors are not kept:
    /// callers check them first.
    pub fn select(&self, rows: &[usize]) -> Encoded {
        let mut payloads = Vec::new();
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        offsets.push(0);
        let mut absent = self
            .absent
            .as_ref()
            .map(|_| vec![0u8; rows.len().div_ceil(8)]);
        for (j, &i) in rows.iter().enumerate() {
            payloads.extend_from_slice(self.payload(i));
            offsets.push(payloads.len() as u32);
            if let Some(a) = absent.as_mut()
                && self.is_absent(i)
            {
                a[j / 8] |= 1 << (j % 8);
            }
        }
        Encoded {
            payloads,
            offsets,
            absent,
            errors: Vec::new(),
        }
    }

    /// Row `i` has no payload at all (a tombstone).
    pub fn is_absent(&self, i: usize) -> bool {
        self.absent
            .as_ref()
            .is_some_and(|a| a.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Decoder,
    Encoder,
}

/// What a decoder or encoder instance is made from (again, after a trap or for a new version).
struct FormatConfig {
    role: Role,
    /// The table's options as given (checked again against a new version's manifest).
    given: Vec<(String, String)>,
    /// With the manifest's defaults.
    options: Vec<(String, String)>,
    /// The row type: the schema's columns but the metadata ones.
    row_type: RowType,
    /// Decoders: the format's metadata keys produced after the row type's columns.
    metadata: Vec<String>,
    schema: SchemaRef,
    /// The manifest's `changelog-mode`, read once (checked on every batch).
    mode: ChangelogMode,
}

impl Configure for FormatConfig {
    type Exports = Box<dyn FormatInstance>;

    fn for_version(&self, plugin: &Plugin) -> Result<Self> {
        FormatConfig::new(
            plugin,
            self.role,
            &self.given,
            self.schema.clone(),
            &self.metadata,
        )
    }

    fn factory(&self) -> &'static str {
        match self.role {
            Role::Decoder => "create-decoder",
            Role::Encoder => "create-encoder",
        }
    }

    fn instantiate(
        &self,
        shared: &PluginShared,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self::Exports> {
        let Pre::Format(pre) = &shared.pre else {
            unreachable!("checked in configure")
        };
        pre.instantiate(store)
    }

    fn create(
        &self,
        store: &mut Store<PluginState>,
        exports: &Self::Exports,
    ) -> wasmtime::Result<std::result::Result<ResourceAny, ConfigError>> {
        match self.role {
            Role::Decoder => {
                exports.create_decoder(store, &self.options, &self.row_type, &self.metadata)
            }
            Role::Encoder => exports.create_encoder(store, &self.options, &self.row_type),
        }
    }
}

/// Checks the plugin is a format and the options fit its manifest, then starts the instance.
fn configure(
    plugin: &Plugin,
    role: Role,
    options: &[(String, String)],
    schema: SchemaRef,
    metadata: &[String],
) -> Result<Instance<FormatConfig>> {
    let config = FormatConfig::new(plugin, role, options, schema, metadata)?;
    Instance::start(plugin, config)
}

impl FormatConfig {
    fn new(
        plugin: &Plugin,
        role: Role,
        given: &[(String, String)],
        schema: SchemaRef,
        metadata: &[String],
    ) -> Result<FormatConfig> {
        let shared = &plugin.shared;
        if shared.manifest.kind != Kind::Format {
            return Err(PluginError::new(
                &*shared.name,
                Phase::Configure,
                anyhow!("is a {} plugin, not a format", shared.manifest.kind),
            ));
        }
        let options = plugin.resolve_options(given)?;
        let declared = shared.manifest.metadata_types();
        for key in metadata {
            if !declared.iter().any(|(k, _)| k == key) {
                let keys: Vec<&str> = declared.iter().map(|(k, _)| *k).collect();
                return Err(PluginError::new(
                    &*shared.name,
                    Phase::Configure,
                    anyhow!(
                        "has no readable metadata key '{key}' (it declares: {})",
                        if keys.is_empty() {
                            "none".to_owned()
                        } else {
                            keys.join(", ")
                        }
                    ),
                ));
            }
        }
        let physical = schema
            .fields()
            .len()
            .checked_sub(metadata.len())
            .ok_or_else(|| {
                PluginError::new(
                    &*shared.name,
                    Phase::Configure,
                    anyhow!("internal: more metadata keys than columns"),
                )
            })?;
        let row_schema = arrow::datatypes::Schema::new(schema.fields()[..physical].to_vec());
        let row_type = row_type_from_arrow(&row_schema)
            .map_err(|e| PluginError::new(&*shared.name, Phase::Configure, e))?;
        Ok(FormatConfig {
            role,
            given: given.to_vec(),
            options,
            row_type,
            metadata: metadata.to_vec(),
            schema,
            mode: shared.manifest.changelog_mode(),
        })
    }
}

fn rejected(shared: &PluginShared, what: String) -> PluginError {
    PluginError::call(&*shared.name, Failure::Rejected, anyhow!(what))
}

fn check_errors(errors: &[RowError], count: u32) -> anyhow::Result<()> {
    let mut last = None;
    for e in errors {
        ensure!(
            e.index < count,
            "row error for index {} of a batch of {count}",
            e.index
        );
        ensure!(
            last.is_none_or(|l| e.index > l),
            "row errors must be ascending and unique"
        );
        last = Some(e.index);
    }
    Ok(())
}

/// A configured decoder: messages in, Arrow rows out.
pub struct Decoder {
    inner: Instance<FormatConfig>,
}

impl Decoder {
    /// Validates `options` against the manifest, then instantiates the plugin and runs `create-decoder`.
    pub fn new(
        plugin: &Plugin,
        options: &[(String, String)],
        schema: SchemaRef,
    ) -> Result<Decoder> {
        Decoder::with_metadata(plugin, options, schema, &[])
    }

    /// A decoder that also produces the format's readable metadata `keys` (declared in its manifest), as
    /// the last `keys.len()` columns of `schema` (ADR 0016).
    pub fn with_metadata(
        plugin: &Plugin,
        options: &[(String, String)],
        schema: SchemaRef,
        keys: &[String],
    ) -> Result<Decoder> {
        Ok(Decoder {
            inner: configure(plugin, Role::Decoder, options, schema, keys)?,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.inner.config().schema
    }

    /// Decodes one message batch. Taken by value: its buffers move into the call's arguments, not copied
    /// (but for a new version's first batches, when the version before it may have to redo the batch).
    pub fn decode(&mut self, messages: MessageBatch) -> Result<Decoded> {
        self.inner.guarded(messages, decode_once)
    }

    /// A checkpoint completed: a newer version of the plugin, if one is waiting, decodes the next batch.
    pub fn checkpoint_completed(&mut self) {
        self.inner.checkpoint_completed();
    }

    /// The version of the plugin this decoder runs.
    pub fn version(&self) -> VersionId {
        self.inner.version()
    }
}

fn decode_once(inner: &mut Instance<FormatConfig>, messages: MessageBatch) -> Result<Decoded> {
    let count = messages.count;
    let bytes_in = (messages.payloads.len() + messages.keys.data.len()) as u64;
    let batch_no = inner.next_batch();
    let called = inner.call(
        &format!("decode-batch (batch {batch_no})"),
        |store, b, r| b.decode_batch(store, r, messages),
    )?;
    let started = called.started;
    let shared = inner.shared();
    let decoded = called.value.map_err(|e| {
        rejected(
            shared,
            format!("decode-batch (batch {batch_no}) failed: {e}"),
        )
    })?;
    check_errors(&decoded.errors, count).map_err(|e| {
        rejected(
            shared,
            format!("decode-batch (batch {batch_no}) returned bad row errors: {e:#}"),
        )
    })?;
    let errors = decoded.errors;
    let rows = decoded.rows.row_count;
    let shape = match &decoded.messages {
        Some(messages) => check_row_messages(messages, rows, &errors, count),
        None if rows as usize + errors.len() != count as usize => Err(anyhow!(
            "{rows} rows and {} errors for {count} messages",
            errors.len()
        )),
        None => Ok(()),
    };
    let mode = inner.config().mode;
    let shape = shape.and_then(|()| match &decoded.kinds {
        Some(k) if k.len() != rows as usize => {
            Err(anyhow!("{} row kinds for {rows} rows", k.len()))
        }
        Some(k) => match k.iter().find(|k| !mode.contains(**k)) {
            Some(k) => Err(anyhow!(
                "a {} row, which its manifest's changelog-mode ({mode}) does not list",
                k.short_string()
            )),
            None => Ok(()),
        },
        None => Ok(()),
    });
    shape.map_err(|e| {
        rejected(
            shared,
            format!("decode-batch (batch {batch_no}) returned {e:#}"),
        )
    })?;
    let batch = from_columns(decoded.rows, &inner.config().schema).map_err(|e| {
        rejected(
            shared,
            format!("decode-batch (batch {batch_no}) returned invalid columns: {e:#}"),
        )
    })?;
    shared.metrics.record_call(
        started.elapsed(),
        batch.num_rows() as u64,
        bytes_in,
        0,
        errors.len() as u64,
    );
    Ok(Decoded {
        batch,
        messages: decoded.messages,
        kinds: decoded.kinds,
        errors,
    })
}

/// A configured encoder: Arrow rows in, payloads out.
pub struct Encoder {
    inner: Instance<FormatConfig>,
}

impl Encoder {
    /// Validates `options` against the manifest, then instantiates the plugin and runs `create-encoder`.
    pub fn new(
        plugin: &Plugin,
        options: &[(String, String)],
        schema: SchemaRef,
    ) -> Result<Encoder> {
        Ok(Encoder {
            inner: configure(plugin, Role::Encoder, options, schema, &[])?,
        })
    }

    /// Encodes one batch of inserts (its schema must be the encoder's).
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Encoded> {
        self.encode_changes(batch, None)
    }

    /// Encodes one row batch with the kind of each row (`None`: inserts only). Kinds the manifest's
    /// `changelog-mode` does not list are refused here, before the plugin sees them.
    pub fn encode_changes(
        &mut self,
        batch: &RecordBatch,
        kinds: Option<&[RowKind]>,
    ) -> Result<Encoded> {
        self.inner.guarded((batch, kinds), |inner, (batch, kinds)| {
            encode_once(inner, batch, kinds)
        })
    }

    /// A checkpoint completed: a newer version of the plugin, if one is waiting, encodes the next batch.
    pub fn checkpoint_completed(&mut self) {
        self.inner.checkpoint_completed();
    }

    /// The version of the plugin this encoder runs.
    pub fn version(&self) -> VersionId {
        self.inner.version()
    }
}

fn encode_once(
    inner: &mut Instance<FormatConfig>,
    batch: &RecordBatch,
    kinds: Option<&[RowKind]>,
) -> Result<Encoded> {
    let shared = inner.shared().clone();
    let mode = inner.config().mode;
    if let Some(k) = kinds.and_then(|k| k.iter().find(|k| !mode.contains(**k))) {
        return Err(PluginError::call(
            &*shared.name,
            Failure::Other,
            anyhow!(
                "encode-batch: a {} row, which the format does not write (its changelog-mode: {mode})",
                k.short_string()
            ),
        ));
    }
    if kinds.is_some_and(|k| k.len() != batch.num_rows()) {
        return Err(PluginError::call(
            &*shared.name,
            Failure::Other,
            anyhow!("internal: encode-batch: one row kind per row expected"),
        ));
    }
    if batch.schema().fields() != inner.config().schema.fields() {
        return Err(PluginError::call(
            &*shared.name,
            Failure::Other,
            anyhow!("encode-batch: the batch's schema differs from the encoder's"),
        ));
    }
    let columns =
        to_columns(batch).map_err(|e| PluginError::call(&*shared.name, Failure::Other, e))?;
    let rows = batch.num_rows();
    let batch_no = inner.next_batch();
    let called = inner.call(
        &format!("encode-batch (batch {batch_no})"),
        |store, b, r| b.encode_batch(store, r, columns, kinds),
    )?;
    let started = called.started;
    let encoded = called.value.map_err(|e| {
        rejected(
            &shared,
            format!("encode-batch (batch {batch_no}) failed: {e}"),
        )
    })?;
    check_errors(&encoded.errors, rows as u32).map_err(|e| {
        rejected(
            &shared,
            format!("encode-batch (batch {batch_no}) returned bad row errors: {e:#}"),
        )
    })?;
    let offsets_ok = encoded.offsets.len() == rows + 1
        && encoded.offsets.first() == Some(&0)
        && encoded.offsets.windows(2).all(|w| w[0] <= w[1])
        && encoded.offsets.last().map(|&l| l as usize) == Some(encoded.payloads.len());
    let absent_ok = encoded.absent.as_ref().is_none_or(|a| {
        a.len() >= rows.div_ceil(8)
            && (0..rows).all(|i| {
                a[i / 8] & (1 << (i % 8)) == 0 || encoded.offsets[i] == encoded.offsets[i + 1]
            })
    });
    if !offsets_ok || !absent_ok {
        return Err(rejected(
            &shared,
            format!(
                "encode-batch (batch {batch_no}) returned {} offsets over {} bytes for {rows} rows",
                encoded.offsets.len(),
                encoded.payloads.len()
            ),
        ));
    }
    shared.metrics.record_call(
        started.elapsed(),
        rows as u64,
        0,
        encoded.payloads.len() as u64,
        encoded.errors.len() as u64,
    );
    Ok(Encoded {
        payloads: encoded.payloads,
        offsets: encoded.offsets,
        absent: encoded.absent,
        errors: encoded.errors,
    })
}

/// A decoder's `messages`: one per row, ascending, each a message of the batch that is not in `errors`.
fn check_row_messages(
    messages: &[u32],
    rows: u32,
    errors: &[RowError],
    count: u32,
) -> anyhow::Result<()> {
    ensure!(
        messages.len() == rows as usize,
        "{} message indexes for {rows} rows",
        messages.len()
    );
    ensure!(
        messages.windows(2).all(|w| w[0] <= w[1]),
        "message indexes that are not ascending"
    );
    if let Some(last) = messages.last() {
        ensure!(
            *last < count,
            "a row of message {last} in a batch of {count}"
        );
    }
    if let Some(e) = errors
        .iter()
        .find(|e| messages.binary_search(&e.index).is_ok())
    {
        anyhow::bail!(
            "rows of message {}, which it also reported as an error",
            e.index
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(index: u32) -> RowError {
        RowError {
            index,
            reason: "bad".into(),
            skip: false,
        }
    }

    #[test]
    fn row_messages_must_be_ascending_in_range_and_not_failed() {
        assert!(check_row_messages(&[0, 0, 2, 2, 2], 5, &[error(1)], 3).is_ok());
        assert!(check_row_messages(&[], 0, &[error(0)], 1).is_ok());
        let msg = |m: &[u32], rows, errors: &[RowError], count| {
            format!(
                "{:#}",
                check_row_messages(m, rows, errors, count).unwrap_err()
            )
        };
        assert!(msg(&[0, 1], 3, &[], 2).contains("2 message indexes for 3 rows"));
        assert!(msg(&[1, 0], 2, &[], 2).contains("not ascending"));
        assert!(msg(&[0, 2], 2, &[], 2).contains("a row of message 2 in a batch of 2"));
        assert!(msg(&[0, 1], 2, &[error(1)], 2).contains("message 1, which it also reported"));
    }

    #[test]
    fn absent_rows_are_read_from_the_bitmap() {
        let e = Encoded {
            payloads: b"ab".to_vec(),
            offsets: vec![0, 1, 1, 2, 2, 2, 2, 2, 2, 2],
            absent: Some(vec![0b0000_0010, 0b0000_0001]),
            errors: vec![],
        };
        let absent: Vec<usize> = (0..e.len()).filter(|&i| e.is_absent(i)).collect();
        assert_eq!(absent, vec![1, 8]);
        let none = Encoded { absent: None, ..e };
        assert!(!(0..none.len()).any(|i| none.is_absent(i)));
    }
}
