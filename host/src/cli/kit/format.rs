//! The kit for format plugins: decode and encode vectors, the cost of both, hostile payloads.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use serde_json::{Map, Value as Json};

use super::hostile::{self, Origin};
use super::values::{column, field, render};
use super::vectors::{Case, Decoded, Encoded, Section, VectorFile};
use super::{Cost, KitConfig, Outcome, is_failure, show_bytes};
use crate::plugins::loader::Plugin;
use crate::plugins::messages::{MessageBatchBuilder, MessageRef};
use crate::plugins::{Decoder, Encoder};
use crate::sql::RowKind;

pub(super) fn run(
    plugin: &Plugin,
    file: &VectorFile,
    config: &KitConfig,
    outcome: &mut Outcome,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut corpus: Vec<(String, Vec<u8>)> = Vec::new();
    // The section with the most decodable payloads measures decoding (and takes the hostile pass), the one
    // with the most encodable rows encoding.
    let mut decode_section: Option<(usize, Vec<Vec<u8>>)> = None;
    let mut encode_section: Option<(usize, Vec<RecordBatch>)> = None;
    for (s, section) in file.sections.iter().enumerate() {
        let before = outcome.failures.len();
        let (payloads, rows) = run_section(plugin, file, section, outcome)?;
        for v in &section.vectors {
            match &v.case {
                Case::Decode { payload, .. } => corpus.push((v.name.clone(), payload.clone())),
                Case::Encode {
                    expect: Encoded::Bytes(b),
                    ..
                } => corpus.push((v.name.clone(), b.clone())),
                _ => {}
            }
        }
        if section.config_error.is_none()
            && decode_section
                .as_ref()
                .is_none_or(|(_, p)| p.len() < payloads.len())
        {
            decode_section = Some((s, payloads));
        }
        if encode_section
            .as_ref()
            .is_none_or(|(_, r)| r.len() < rows.len())
        {
            encode_section = Some((s, rows));
        }
        writeln!(
            out,
            "section `{}` (line {}): {} vectors, {} failed",
            section.name,
            section.line,
            section.vectors.len() + usize::from(section.config_error.is_some()),
            outcome.failures.len() - before
        )?;
    }
    if let Some((s, payloads)) = decode_section {
        let section = &file.sections[s];
        if let Ok(mut decoder) = Decoder::new(plugin, &section.options, schema_of(section)) {
            if !payloads.is_empty() {
                let cost = decode_cost(&mut decoder, &payloads, config, outcome)?;
                outcome.costs.push(cost);
            }
            hostile_pass(&mut decoder, &corpus, config, outcome);
        }
    }
    if let Some((s, rows)) = encode_section.filter(|(_, r)| !r.is_empty()) {
        let section = &file.sections[s];
        let schema = schema_of(section);
        if let Ok(mut encoder) = Encoder::new(plugin, &section.options, schema.clone()) {
            let cost = encode_cost(&mut encoder, &schema, &rows, config, outcome)?;
            outcome.costs.push(cost);
        }
    }
    Ok(())
}

fn schema_of(section: &Section) -> SchemaRef {
    Arc::new(Schema::new(
        section
            .columns
            .iter()
            .map(|(n, t)| field(n, t))
            .collect::<Vec<_>>(),
    ))
}

/// Runs one section's vectors; returns the payloads and the rows that passed (the cost inputs).
fn run_section(
    plugin: &Plugin,
    file: &VectorFile,
    section: &Section,
    outcome: &mut Outcome,
) -> anyhow::Result<(Vec<Vec<u8>>, Vec<RecordBatch>)> {
    let schema = schema_of(section);
    let decoder = outcome.timed(|| Decoder::new(plugin, &section.options, schema.clone()));
    let encoder = outcome.timed(|| Encoder::new(plugin, &section.options, schema.clone()));
    if let Some(want) = &section.config_error {
        outcome.vectors += 1;
        match &decoder {
            Ok(_) => outcome.fail(
                file,
                section.line,
                &section.name,
                format!("create-decoder accepted options the section says it refuses ({want:?})"),
            ),
            Err(e) if !format!("{e}").contains(want.as_str()) => outcome.fail(
                file,
                section.line,
                &section.name,
                format!("create-decoder refused, but without {want:?}: {e}"),
            ),
            Err(_) => {}
        }
        return Ok((Vec::new(), Vec::new()));
    }
    let (mut decoder, mut encoder) = (
        decoder.map_err(|e| e.to_string()),
        encoder.map_err(|e| e.to_string()),
    );
    let mut payloads = Vec::new();
    let mut rows = Vec::new();
    for v in &section.vectors {
        outcome.vectors += 1;
        let result = match &v.case {
            Case::Decode { payload, expect } => match &mut decoder {
                Err(e) => Err(format!("create-decoder failed: {e}")),
                Ok(d) => {
                    let r = decode_check(d, section, payload, expect, outcome);
                    if r.is_ok() && matches!(expect, Decoded::Rows(_)) {
                        payloads.push(payload.clone());
                    }
                    r
                }
            },
            Case::Encode { row, kind, expect } => match &mut encoder {
                Err(e) => Err(format!("create-encoder failed: {e}")),
                Ok(enc) => match encode_check(enc, &schema, section, row, kind, expect, outcome) {
                    Ok(Some(batch)) => {
                        rows.push(batch);
                        Ok(())
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                },
            },
            Case::Route { .. } => Err("a route vector, but the plugin is a format".to_owned()),
        };
        if let Err(what) = result {
            outcome.fail(file, v.line, &v.name, what);
        }
    }
    Ok((payloads, rows))
}

fn one_message(payload: &[u8]) -> crate::plugins::model::MessageBatch {
    let mut b = MessageBatchBuilder::new();
    b.push(MessageRef {
        payload,
        ..Default::default()
    });
    b.finish(false)
}

fn decode_check(
    decoder: &mut Decoder,
    section: &Section,
    payload: &[u8],
    expect: &Decoded,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let decoded = outcome
        .timed(|| decoder.decode(one_message(payload)))
        .map_err(|e| format!("decode-batch failed: {e}"))?;
    let rows = decoded.batch.num_rows();
    let got = || {
        if let Some(e) = decoded.errors.first() {
            format!(
                "a row error{} ({:?})",
                if e.skip { " marked as a skip" } else { "" },
                e.reason
            )
        } else {
            format!(
                "{rows} rows: {}",
                describe_rows(&decoded.batch, decoded.kinds.as_deref())
            )
        }
    };
    match expect {
        Decoded::Skip => {
            if (rows == 0 && decoded.errors.is_empty()) || decoded.errors.iter().any(|e| e.skip) {
                Ok(())
            } else {
                Err(format!("expected a skip, got {}", got()))
            }
        }
        Decoded::Error(want) => match decoded.errors.first() {
            Some(e) if !e.skip && e.reason.contains(want.as_str()) => Ok(()),
            Some(e) if !e.skip => Err(format!(
                "expected a row error containing {want:?}, got the reason {:?}",
                e.reason
            )),
            _ => Err(format!("expected a row error, got {}", got())),
        },
        Decoded::Rows(want) => {
            if !decoded.errors.is_empty() || rows != want.len() {
                return Err(format!("expected {} rows, got {}", want.len(), got()));
            }
            for (j, (kind, row)) in want.iter().enumerate() {
                let got_kind = decoded.kinds.as_ref().map_or("+I", |k| k[j].short_string());
                let want_kind = kind.as_deref().unwrap_or("+I");
                if got_kind != want_kind {
                    return Err(format!(
                        "row {j}: expected kind {want_kind}, got {got_kind}"
                    ));
                }
                let mut diffs = Vec::new();
                for (name, value) in row {
                    let Some(c) = section.columns.iter().position(|(n, _)| n == name) else {
                        return Err(format!(
                            "the vector names column `{name}`, which the header does not declare"
                        ));
                    };
                    let want = column(&section.columns[c].1, &[Some(value)])
                        .map_err(|e| format!("expected value of `{name}`: {e:#}"))?;
                    let (w, g) = (render(&want, 0), render(decoded.batch.column(c), j));
                    if w != g {
                        diffs.push(format!("`{name}` expected {w}, got {g}"));
                    }
                }
                if !diffs.is_empty() {
                    return Err(format!("row {j}: {}", diffs.join("; ")));
                }
            }
            Ok(())
        }
    }
}

fn describe_rows(batch: &RecordBatch, kinds: Option<&[RowKind]>) -> String {
    (0..batch.num_rows().min(3))
        .map(|j| {
            let cells: Vec<String> = batch
                .schema()
                .fields()
                .iter()
                .zip(batch.columns())
                .map(|(f, c)| format!("{}: {}", f.name(), render(c, j)))
                .collect();
            format!(
                "{}[{}]",
                kinds.map_or("+I", |k| k[j].short_string()),
                cells.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The one-row batch of an encode vector.
fn row_batch(
    schema: &SchemaRef,
    section: &Section,
    row: &Map<String, Json>,
) -> Result<RecordBatch, String> {
    if let Some(k) = row
        .keys()
        .find(|k| !section.columns.iter().any(|(n, _)| n == *k))
    {
        return Err(format!(
            "the row names column `{k}`, which the header does not declare"
        ));
    }
    let columns = section
        .columns
        .iter()
        .map(|(name, ty)| {
            column(ty, &[row.get(name)]).map_err(|e| format!("column `{name}`: {e:#}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| format!("the row: {e}"))
}

fn row_kind(text: &str) -> Result<RowKind, String> {
    RowKind::ALL
        .into_iter()
        .find(|k| k.short_string() == text)
        .ok_or_else(|| format!("row kind `{text}` is not one of +I, -U, +U, -D"))
}

fn encode_check(
    encoder: &mut Encoder,
    schema: &SchemaRef,
    section: &Section,
    row: &Map<String, Json>,
    kind: &Option<String>,
    expect: &Encoded,
    outcome: &mut Outcome,
) -> Result<Option<RecordBatch>, String> {
    let batch = row_batch(schema, section, row)?;
    let kinds = kind.as_deref().map(row_kind).transpose()?.map(|k| vec![k]);
    let encoded = outcome
        .timed(|| encoder.encode_changes(&batch, kinds.as_deref()))
        .map_err(|e| format!("encode-batch failed: {e}"))?;
    let got = || match encoded.errors.first() {
        Some(e) => format!("a row error ({:?})", e.reason),
        None if encoded.is_absent(0) => "no payload (a tombstone)".to_owned(),
        None => show_bytes(encoded.payload(0)),
    };
    match expect {
        Encoded::Bytes(want) => {
            if encoded.errors.is_empty()
                && !encoded.is_absent(0)
                && encoded.payload(0) == want.as_slice()
            {
                // Rows of a kind other than +I are not measured (the cost batch is inserts).
                Ok(kinds.is_none().then_some(batch))
            } else {
                Err(format!("expected {}, got {}", show_bytes(want), got()))
            }
        }
        Encoded::Absent => {
            if encoded.errors.is_empty() && encoded.is_absent(0) {
                Ok(None)
            } else {
                Err(format!("expected no payload (a tombstone), got {}", got()))
            }
        }
        Encoded::Error(want) => match encoded.errors.first() {
            Some(e) if e.reason.contains(want.as_str()) => Ok(None),
            _ => Err(format!(
                "expected a row error containing {want:?}, got {}",
                got()
            )),
        },
    }
}

fn decode_cost(
    decoder: &mut Decoder,
    payloads: &[Vec<u8>],
    config: &KitConfig,
    outcome: &mut Outcome,
) -> anyhow::Result<Cost> {
    let batch = |start: usize| {
        let mut b = MessageBatchBuilder::new();
        let mut bytes = 0;
        for i in 0..config.batch {
            let p = &payloads[(start + i) % payloads.len()];
            bytes += p.len();
            b.push(MessageRef {
                payload: p,
                ..Default::default()
            });
        }
        (b.finish(false), bytes)
    };
    // One batch to warm up (first-call costs are not the plugin's steady state).
    decoder
        .decode(batch(0).0)
        .map_err(|e| anyhow!("decoding the cost batch: {e}"))?;
    let (mut items, mut bytes, mut elapsed) = (0, 0, std::time::Duration::ZERO);
    while items < config.cost_messages && elapsed < config.cost_time {
        let (messages, n) = batch(items);
        let started = Instant::now();
        decoder
            .decode(messages)
            .map_err(|e| anyhow!("decoding the cost batch: {e}"))?;
        let took = started.elapsed();
        outcome.slowest_call = outcome.slowest_call.max(took);
        elapsed += took;
        items += config.batch;
        bytes += n;
    }
    Ok(Cost {
        what: "decode",
        items,
        bytes,
        elapsed,
        batch: config.batch,
    })
}

fn encode_cost(
    encoder: &mut Encoder,
    schema: &SchemaRef,
    rows: &[RecordBatch],
    config: &KitConfig,
    outcome: &mut Outcome,
) -> anyhow::Result<Cost> {
    let cycle: Vec<&RecordBatch> = (0..config.batch).map(|i| &rows[i % rows.len()]).collect();
    let batch = arrow::compute::concat_batches(schema, cycle)?;
    encoder
        .encode(&batch)
        .map_err(|e| anyhow!("encoding the cost batch: {e}"))?;
    let (mut items, mut bytes, mut elapsed) = (0, 0, std::time::Duration::ZERO);
    while items < config.cost_messages && elapsed < config.cost_time {
        let started = Instant::now();
        let encoded = encoder
            .encode(&batch)
            .map_err(|e| anyhow!("encoding the cost batch: {e}"))?;
        let took = started.elapsed();
        outcome.slowest_call = outcome.slowest_call.max(took);
        elapsed += took;
        items += batch.num_rows();
        bytes += encoded.payloads.len();
    }
    Ok(Cost {
        what: "encode",
        items,
        bytes,
        elapsed,
        batch: config.batch,
    })
}

/// Messages per call of the hostile pass (a failing batch is retried message by message).
const HOSTILE_BATCH: usize = 64;

fn hostile_pass(
    decoder: &mut Decoder,
    corpus: &[(String, Vec<u8>)],
    config: &KitConfig,
    outcome: &mut Outcome,
) {
    let inputs = hostile::inputs(corpus, config.random_inputs, config.seed);
    let h = &mut outcome.hostile;
    for i in &inputs {
        h.inputs += 1;
        match i.origin {
            Origin::Truncated => h.truncated += 1,
            Origin::Mutated => h.mutated += 1,
            Origin::Random => h.random += 1,
            Origin::Oversized => h.oversized += 1,
        }
    }
    for chunk in inputs.chunks(HOSTILE_BATCH) {
        let mut b = MessageBatchBuilder::new();
        for i in chunk {
            b.push(MessageRef {
                payload: &i.bytes,
                ..Default::default()
            });
        }
        let started = Instant::now();
        let result = decoder.decode(b.finish(false));
        outcome.slowest_call = outcome.slowest_call.max(started.elapsed());
        let h = &mut outcome.hostile;
        match result {
            Ok(d) => {
                h.rows += d.batch.num_rows();
                h.row_errors += d.errors.len();
            }
            Err(e) if !is_failure(&e) => h.refused += 1,
            Err(e) => {
                // Find the input(s) that fail on their own (the decoder has a fresh instance by now).
                let mut named = false;
                for i in chunk {
                    if let Err(e) = decoder.decode(one_message(&i.bytes))
                        && is_failure(&e)
                    {
                        outcome.hostile.failures.push(format!(
                            "{} ({}): {e}",
                            i.what,
                            show_bytes(&i.bytes[..i.bytes.len().min(48)])
                        ));
                        named = true;
                    }
                }
                if !named {
                    outcome.hostile.failures.push(format!(
                        "a batch of {} inputs from `{}` failed, though each input alone decodes: {e}",
                        chunk.len(),
                        chunk[0].what
                    ));
                }
            }
        }
    }
}
