//! Format plugins: configured decoders (messages → Arrow) and encoders (Arrow → payloads).

use std::sync::Arc;

use anyhow::{anyhow, ensure};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use wasmtime::component::ResourceAny;

use super::bindings::v0_1_0::format::Format;
use super::bindings::v0_1_0::types as wit;
use super::columns::{from_columns, to_columns};
use super::error::{Failure, Phase, PluginError, Result};
use super::loader::{Plugin, PluginShared, Pre};
use super::manifest::Kind;
use super::sandbox::Sandbox;
use super::schema::row_type_from_arrow;

/// A message (or row) the plugin could not handle; the rest of the batch is fine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub index: u32,
    pub reason: String,
}

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

impl Role {
    fn factory(self) -> &'static str {
        match self {
            Role::Decoder => "create-decoder",
            Role::Encoder => "create-encoder",
        }
    }
}

/// A configured instance of a format: its own store, the resource the factory made, and what it
/// takes to make them again after a trap.
struct Configured {
    shared: Arc<PluginShared>,
    role: Role,
    options: Vec<(String, String)>,
    row_type: wit::RowType,
    schema: SchemaRef,
    live: Option<(Sandbox<Format>, ResourceAny)>,
    batches: u64,
}

impl Configured {
    fn new(
        plugin: &Plugin,
        role: Role,
        options: &[(String, String)],
        schema: SchemaRef,
    ) -> Result<Configured> {
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
        let mut configured = Configured {
            shared,
            role,
            options,
            row_type,
            schema,
            live: None,
            batches: 0,
        };
        configured.start()?;
        Ok(configured)
    }

    /// Instantiates from the pre-linked component and runs the factory.
    fn start(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let Pre::Format(pre) = &shared.pre else {
            unreachable!("checked in Configured::new")
        };
        let mut sandbox = Sandbox::new(&shared, |store| pre.instantiate(store))?;
        let factory = self.role.factory();
        let (options, row_type, role) = (&self.options, &self.row_type, self.role);
        let called = sandbox.call(&shared, factory, |store, bindings: &Format| {
            let codec = bindings.pulsar_connect_plugin_codec();
            match role {
                Role::Decoder => codec.call_create_decoder(store, options, row_type),
                Role::Encoder => codec.call_create_encoder(store, options, row_type),
            }
        });
        let called = called
            .map_err(|e| PluginError::new(&*shared.name, Phase::Configure, anyhow!("{e}")))?;
        shared
            .metrics
            .record_call(called.started.elapsed(), 0, 0, 0, 0);
        let resource = called.value.map_err(|e| {
            let option = e
                .option
                .map(|o| format!("option `{o}`: "))
                .unwrap_or_default();
            PluginError::new(
                &*shared.name,
                Phase::Configure,
                anyhow!("{factory} refused: {option}{}", e.message),
            )
        })?;
        self.live = Some((sandbox, resource));
        Ok(())
    }

    /// Runs one batch call; after a trap the instance is replaced (factory re-run) before returning
    /// the error.
    fn run<R>(
        &mut self,
        call: &str,
        f: impl FnOnce(
            &mut wasmtime::Store<super::state::PluginState>,
            &Format,
            ResourceAny,
        ) -> wasmtime::Result<R>,
    ) -> Result<(R, std::time::Instant)> {
        self.batches += 1;
        let batch = self.batches;
        if self.live.is_none() {
            self.start()?;
        }
        let shared = self.shared.clone();
        let Some((sandbox, resource)) = self.live.as_mut() else {
            unreachable!("started above")
        };
        let resource = *resource;
        match sandbox.call(&shared, &format!("{call} (batch {batch})"), |store, b| {
            f(store, b, resource)
        }) {
            Ok(called) => Ok((called.value, called.started)),
            Err(mut err) => {
                // The store is poisoned: drop it, start a fresh instance with the same configuration.
                self.live = None;
                let restart = match self.start() {
                    Ok(()) => "; a fresh instance replaced it".to_owned(),
                    Err(e) => format!("; replacing the instance failed too: {e}"),
                };
                err = PluginError::call(
                    &*shared.name,
                    err.failure,
                    anyhow!("{:#}{restart}", err.inner()),
                );
                Err(err)
            }
        }
    }
}

fn rejected(shared: &PluginShared, what: String) -> PluginError {
    PluginError::call(&*shared.name, Failure::Rejected, anyhow!(what))
}

fn check_errors(errors: &[wit::RowError], count: u32) -> anyhow::Result<Vec<RowError>> {
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
    Ok(errors
        .iter()
        .map(|e| RowError {
            index: e.index,
            reason: e.reason.clone(),
        })
        .collect())
}

/// A configured decoder: messages in, Arrow rows out.
pub struct Decoder {
    inner: Configured,
}

impl Decoder {
    /// Validates `options` against the manifest, then instantiates the plugin and runs `create-decoder`.
    pub fn new(
        plugin: &Plugin,
        options: &[(String, String)],
        schema: SchemaRef,
    ) -> Result<Decoder> {
        Ok(Decoder {
            inner: Configured::new(plugin, Role::Decoder, options, schema)?,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.inner.schema
    }

    /// Decodes one message batch.
    pub fn decode(&mut self, messages: &wit::MessageBatch) -> Result<Decoded> {
        let count = messages.count;
        let bytes_in = (messages.payloads.len() + messages.keys.data.len()) as u64;
        let (result, started) = self.inner.run("decode-batch", |store, b, r| {
            b.pulsar_connect_plugin_codec()
                .decoder()
                .call_decode_batch(store, r, messages)
        })?;
        let shared = &self.inner.shared;
        let batch_no = self.inner.batches;
        let decoded = result.map_err(|e| {
            rejected(
                shared,
                format!("decode-batch (batch {batch_no}) failed: {e}"),
            )
        })?;
        let errors = check_errors(&decoded.errors, count).map_err(|e| {
            rejected(
                shared,
                format!("decode-batch (batch {batch_no}) returned bad row errors: {e:#}"),
            )
        })?;
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
        let batch = from_columns(decoded.rows, &self.inner.schema).map_err(|e| {
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
    inner: Configured,
}

impl Encoder {
    /// Validates `options` against the manifest, then instantiates the plugin and runs `create-encoder`.
    pub fn new(
        plugin: &Plugin,
        options: &[(String, String)],
        schema: SchemaRef,
    ) -> Result<Encoder> {
        Ok(Encoder {
            inner: Configured::new(plugin, Role::Encoder, options, schema)?,
        })
    }

    /// Encodes one row batch (its schema must be the encoder's).
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Encoded> {
        let shared = self.inner.shared.clone();
        if batch.schema().fields() != self.inner.schema.fields() {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Other,
                anyhow!("encode-batch: the batch's schema differs from the encoder's"),
            ));
        }
        let columns =
            to_columns(batch).map_err(|e| PluginError::call(&*shared.name, Failure::Other, e))?;
        let rows = batch.num_rows();
        let (result, started) = self.inner.run("encode-batch", |store, b, r| {
            b.pulsar_connect_plugin_codec()
                .encoder()
                .call_encode_batch(store, r, &columns)
        })?;
        let batch_no = self.inner.batches;
        let encoded = result.map_err(|e| {
            rejected(
                &shared,
                format!("encode-batch (batch {batch_no}) failed: {e}"),
            )
        })?;
        let errors = check_errors(&encoded.errors, rows as u32).map_err(|e| {
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
            errors.len() as u64,
        );
        Ok(Encoded {
            payloads: encoded.payloads,
            offsets: encoded.offsets,
            errors,
        })
    }
}
