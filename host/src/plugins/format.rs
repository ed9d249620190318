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
use super::model::{ConfigError, MessageBatch, RowError, RowType};
use super::schema::row_type_from_arrow;
use super::state::PluginState;

/// The rows decoded from a message batch. `batch` holds one row per message not in `errors`, in
/// message order.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub batch: RecordBatch,
    pub errors: Vec<RowError>,
}

impl Decoded {
    /// The message index of each row of `batch`.
    pub fn row_messages(&self) -> Vec<u32> {
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

/// Payloads encoded from a row batch, one per row; rows in `errors` have an empty payload.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub payloads: Vec<u8>,
    pub offsets: Vec<u32>,
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
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Decoder,
    Encoder,
}

/// What a decoder or encoder instance is made from (again, after a trap).
struct FormatConfig {
    role: Role,
    options: Vec<(String, String)>,
    row_type: RowType,
    schema: SchemaRef,
}

impl Configure for FormatConfig {
    type Exports = Box<dyn FormatInstance>;

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
            Role::Decoder => exports.create_decoder(store, &self.options, &self.row_type),
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
) -> Result<Instance<FormatConfig>> {
    let shared = plugin.shared.clone();
    if shared.manifest.kind != Kind::Format {
        return Err(PluginError::new(
            &*shared.name,
            Phase::Configure,
            anyhow!("is a {} plugin, not a format", shared.manifest.kind),
        ));
    }
    let options = plugin.resolve_options(options)?;
    let row_type = row_type_from_arrow(&schema)
        .map_err(|e| PluginError::new(&*shared.name, Phase::Configure, e))?;
    let config = FormatConfig {
        role,
        options,
        row_type,
        schema,
    };
    Instance::start(shared, config)
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
        Ok(Decoder {
            inner: configure(plugin, Role::Decoder, options, schema)?,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.inner.config().schema
    }

    /// Decodes one message batch. Taken by value: its buffers move into the call's arguments, not copied.
    pub fn decode(&mut self, messages: MessageBatch) -> Result<Decoded> {
        let count = messages.count;
        let bytes_in = (messages.payloads.len() + messages.keys.data.len()) as u64;
        let batch_no = self.inner.next_batch();
        let called = self.inner.call(
            &format!("decode-batch (batch {batch_no})"),
            |store, b, r| b.decode_batch(store, r, messages),
        )?;
        let started = called.started;
        let shared = self.inner.shared();
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
        if decoded.rows.row_count as usize + errors.len() != count as usize {
            return Err(rejected(
                shared,
                format!(
                    "decode-batch (batch {batch_no}) returned {} rows and {} errors for {count} messages",
                    decoded.rows.row_count,
                    errors.len()
                ),
            ));
        }
        let batch = from_columns(decoded.rows, &self.inner.config().schema).map_err(|e| {
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
        Ok(Decoded { batch, errors })
    }
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
            inner: configure(plugin, Role::Encoder, options, schema)?,
        })
    }

    /// Encodes one row batch (its schema must be the encoder's).
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Encoded> {
        let shared = self.inner.shared().clone();
        if batch.schema().fields() != self.inner.config().schema.fields() {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Other,
                anyhow!("encode-batch: the batch's schema differs from the encoder's"),
            ));
        }
        let columns =
            to_columns(batch).map_err(|e| PluginError::call(&*shared.name, Failure::Other, e))?;
        let rows = batch.num_rows();
        let batch_no = self.inner.next_batch();
        let called = self.inner.call(
            &format!("encode-batch (batch {batch_no})"),
            |store, b, r| b.encode_batch(store, r, columns),
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
        if !offsets_ok {
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
            errors: encoded.errors,
        })
    }
}
