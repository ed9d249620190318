//! `datagen`: generates rows, random or sequential per column, at a given rate (Flink's `datagen` connector).
//!
//! Every column type is supported (nested ARRAY / MAP / ROW included). `sequence` columns make the source
//! bounded (it ends when the shortest sequence is exhausted), as does `number-of-rows`.
//! State is the number of rows emitted, so after a restore sequences continue where the checkpoint was taken.

mod generate;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use arrow::datatypes::{DataType, SchemaRef};
use async_trait::async_trait;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::json;

use crate::connector_api::{
    CatalogTable, ConnectorFactory, SinkFactory, Source, SourceFactory, SourcePoll,
};
use crate::options::{OptionDecl, OptionSet, ResolvedOptions, Rule};
use crate::sql::ColumnKind;

pub use generate::{FieldSpec, Kind};

static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'datagen'",
        "Source only. Generates rows; `#` stands for a column name.",
        vec![
            OptionDecl::int("rows-per-second", 1, i64::MAX, "Rows generated per second.")
                .default("10000"),
            OptionDecl::int(
                "number-of-rows",
                0,
                i64::MAX,
                "Total rows to generate; unbounded when not set (unless a column is a sequence).",
            ),
            OptionDecl::enumeration(
                "fields.#.kind",
                &["random", "sequence"],
                "Generator of the column.",
            )
            .default("random"),
            OptionDecl::int(
                "fields.#.start",
                i64::MIN,
                i64::MAX,
                "First value of a sequence (required for `sequence`).",
            ),
            OptionDecl::int(
                "fields.#.end",
                i64::MIN,
                i64::MAX,
                "Last value of a sequence, inclusive (required for `sequence`).",
            ),
            OptionDecl::double(
                "fields.#.min",
                f64::MIN,
                f64::MAX,
                "Minimum random value (numeric columns). Default: the type's minimum (0 for floating point).",
            ),
            OptionDecl::double(
                "fields.#.max",
                f64::MIN,
                f64::MAX,
                "Maximum random value (numeric columns). Default: the type's maximum (1e6 for floating point).",
            ),
            OptionDecl::int(
                "fields.#.length",
                0,
                1 << 20,
                "Length of random strings and bytes (default 100) and size of arrays and maps (default 3).",
            ),
            OptionDecl::double(
                "fields.#.null-rate",
                0.0,
                1.0,
                "Fraction of NULL values (nullable columns only).",
            )
            .default("0"),
            OptionDecl::duration(
                "fields.#.max-past",
                "Random timestamps and dates lie between now minus this and now (default 0: now).",
            ),
            OptionDecl::int(
                "scan.parallelism",
                1,
                1,
                "Accepted for compatibility with Flink; pulsar-connect runs one reader per INSERT.",
            ),
        ],
        vec![
            Rule::NotGreater {
                min: "fields.#.min",
                max: "fields.#.max",
            },
            Rule::NotGreater {
                min: "fields.#.start",
                max: "fields.#.end",
            },
        ],
    )
});

pub struct DatagenFactory;

impl DatagenFactory {
    pub fn new() -> Self {
        DatagenFactory
    }
}

impl Default for DatagenFactory {
    fn default() -> Self {
        Self::new()
    }
}

fn specs(table: &CatalogTable) -> Result<Vec<FieldSpec>> {
    let o: &ResolvedOptions = &table.options;
    let mut out = Vec::new();
    for c in table.source_columns() {
        let f = crate::connector_api::column_field(c);
        let name = &c.name;
        let g = |suffix: &str| o.get(&format!("fields.{name}.{suffix}"));
        let kind = match g("kind").unwrap_or("random") {
            "sequence" => {
                let (Some(start), Some(end)) = (g("start"), g("end")) else {
                    bail!(
                        "column '{name}': a sequence needs 'fields.{name}.start' and 'fields.{name}.end'"
                    );
                };
                let (start, end): (i64, i64) = (start.trim().parse()?, end.trim().parse()?);
                if !matches!(
                    f.data_type(),
                    DataType::Int8
                        | DataType::Int16
                        | DataType::Int32
                        | DataType::Int64
                        | DataType::Float32
                        | DataType::Float64
                        | DataType::Decimal128(_, _)
                        | DataType::Utf8
                ) {
                    bail!(
                        "column '{name}': sequence generates numbers or strings, not {}",
                        f.data_type()
                    );
                }
                Kind::Sequence { start, end }
            }
            _ => {
                for k in ["start", "end"] {
                    if g(k).is_some() {
                        bail!(
                            "option 'fields.{name}.{k}' only applies to 'fields.{name}.kind' = 'sequence'"
                        );
                    }
                }
                Kind::Random
            }
        };
        let numeric = f.data_type().is_numeric();
        for k in ["min", "max"] {
            if g(k).is_some() && !numeric {
                bail!(
                    "option 'fields.{name}.{k}' only applies to numeric columns; '{name}' is {}",
                    f.data_type()
                );
            }
        }
        let null_rate = g("null-rate")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if null_rate > 0.0 && !f.is_nullable() {
            bail!("option 'fields.{name}.null-rate': column '{name}' is NOT NULL");
        }
        out.push(FieldSpec {
            kind,
            min: g("min").and_then(|v| v.trim().parse().ok()),
            max: g("max").and_then(|v| v.trim().parse().ok()),
            length: g("length").and_then(|v| v.trim().parse().ok()),
            null_rate,
            max_past: g("max-past")
                .and_then(|v| crate::options::duration::parse(v).ok())
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

impl ConnectorFactory for DatagenFactory {
    fn name(&self) -> &'static str {
        "datagen"
    }
    fn options(&self) -> &OptionSet {
        &OPTIONS
    }
    fn validate_table(
        &self,
        table: &CatalogTable,
    ) -> Result<Option<crate::connector_api::TableConfigSlot>> {
        Ok(Some(Arc::new(DatagenConfig::of(table)?)))
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        Some(self)
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        None
    }
}

impl SourceFactory for DatagenFactory {
    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>> {
        let cfg = match table.config_as::<DatagenConfig>() {
            Some(cfg) => cfg,
            None => Arc::new(DatagenConfig::of(table)?),
        };
        Ok(Box::new(DatagenSource {
            schema: table.source_schema(),
            specs: cfg.specs.clone(),
            rows_per_second: cfg.rows_per_second,
            total: cfg.total,
            emitted: 0,
            rate_base: None,
            rng: SmallRng::from_os_rng(),
        }))
    }
}

/// A datagen table's options decoded once, at validation.
#[derive(Debug)]
struct DatagenConfig {
    specs: Vec<FieldSpec>,
    rows_per_second: f64,
    /// Rows to generate: `number-of-rows`, or fewer when a sequence ends first; `None`: unbounded.
    total: Option<u64>,
}

impl DatagenConfig {
    fn of(table: &CatalogTable) -> Result<Self> {
        if table
            .def
            .columns
            .iter()
            .any(|c| matches!(c.kind, ColumnKind::Metadata { .. }))
        {
            bail!("connector 'datagen' has no metadata columns");
        }
        let specs = specs(table)?;
        let seq_len = specs
            .iter()
            .filter_map(|s| match s.kind {
                Kind::Sequence { start, end } => {
                    Some((end as i128 - start as i128 + 1).max(0) as u64)
                }
                Kind::Random => None,
            })
            .min();
        let rows = table.options.get_i64("number-of-rows").map(|n| n as u64);
        let total = match (rows, seq_len) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(DatagenConfig {
            specs,
            rows_per_second: table
                .options
                .get_i64("rows-per-second")
                .unwrap_or(10000)
                .max(1) as f64,
            total,
        })
    }
}

pub struct DatagenSource {
    schema: SchemaRef,
    specs: Vec<FieldSpec>,
    rows_per_second: f64,
    total: Option<u64>,
    emitted: u64,
    /// When rate limiting started and how many rows had been emitted then.
    rate_base: Option<(Instant, u64)>,
    rng: SmallRng,
}

#[async_trait]
impl Source for DatagenSource {
    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        self.emitted = state
            .get("emitted")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| anyhow!("datagen state without 'emitted': {state}"))?;
        Ok(())
    }

    async fn poll_batch(&mut self, max_rows: usize) -> Result<SourcePoll> {
        let remaining = self
            .total
            .map(|t| t.saturating_sub(self.emitted))
            .unwrap_or(u64::MAX);
        if remaining == 0 {
            return Ok(SourcePoll::End);
        }
        let (base, base_rows) = *self.rate_base.get_or_insert((Instant::now(), self.emitted));
        let rps = self.rows_per_second;
        // Row k (counted from the rate base) is due at k / rows-per-second.
        let allowed = || (base.elapsed().as_secs_f64() * rps) as u64 + 1;
        let done = self.emitted - base_rows;
        let mut now_allowed = allowed();
        if now_allowed <= done {
            // Cancel safe: nothing changes before this await.
            let wait = Duration::from_secs_f64(done as f64 / rps).saturating_sub(base.elapsed());
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
            now_allowed = allowed().max(done + 1);
        }
        let due = now_allowed - done;
        let n = due.min(remaining).min(max_rows as u64) as usize;
        let batch = generate::batch(&self.schema, &self.specs, self.emitted, n, &mut self.rng)?;
        self.emitted += n as u64;
        Ok(SourcePoll::Batch(batch))
    }

    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(json!({ "emitted": self.emitted }))
    }
}
