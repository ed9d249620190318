//! A transient `SELECT`: planned over the session's tables as an INSERT into a result table of the
//! query's columns ([`super::result`]), run by the runtime as any pipeline (no state directory), its
//! rows printed live in tableau mode. Ctrl-C stops it (a final checkpoint, then the pipeline drains);
//! then the subscriptions it opened on the broker are dropped, so nothing of it stays behind.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use crate::catalog::CatalogTable;
use crate::connector_api::changelog;
use crate::planner::{self, SourceSpec};
use crate::runtime::{self, Metrics, RunOptions};
use crate::sql::{self, Statement};

use super::result::{self, RESULT_TABLE};
use super::session::{Session, padded};
use super::split::Piece;
use super::tableau;

/// Parses the query as the query of `INSERT INTO <result>`, positions as typed.
fn parse(piece: &Piece) -> Result<sql::Insert, Vec<String>> {
    // The INSERT line is put above the query: the query keeps its columns, and its lines move by one.
    let text = format!("INSERT INTO `{RESULT_TABLE}`\n{}", padded(piece));
    let mut statements = sql::parse_script(&text).map_err(|mut e| {
        e.pos.line = e.pos.line.saturating_sub(1).max(1);
        vec![e.to_string()]
    })?;
    match statements.pop() {
        Some(Statement::Insert(mut insert)) if statements.is_empty() => {
            insert.pos = insert.query_pos;
            insert.pos.line -= 1;
            insert.query_pos.line -= 1;
            Ok(insert)
        }
        _ => Err(vec![format!(
            "line {}, column {}: expected one query (SELECT ...)",
            piece.line, piece.column
        )]),
    }
}

/// Runs the query until its source ends or Ctrl-C, printing rows to `out` as they arrive.
pub async fn run(session: &Session, piece: &Piece, out: &mut dyn Write) -> Result<(), Vec<String>> {
    static SELECTS: AtomicU64 = AtomicU64::new(0);
    let insert = parse(piece)?;
    let mut catalog = session.catalog()?;
    crate::catalog::apply_hints(&mut catalog, &[&insert], &session.registry)?;
    let schema = planner::query_schema(&catalog, &insert.query, insert.query_pos)
        .await
        .map_err(|e| vec![format!("{e:#}")])?;
    let (rows_tx, mut rows_rx) = mpsc::channel::<RecordBatch>(16);
    let table = result::table(&schema, rows_tx).map_err(|e| vec![format!("{e:#}")])?;
    let fields: Vec<arrow::datatypes::Field> = table
        .sink_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    catalog.order.push(RESULT_TABLE.to_string());
    catalog
        .tables
        .insert(RESULT_TABLE.to_string(), Arc::new(table));
    let plans = planner::plan_job(&catalog, &[&insert])
        .await
        .map_err(|es| {
            es.iter()
                .map(|e| format!("{e:#}").replace(&format!("INSERT INTO {RESULT_TABLE}"), "SELECT"))
                .collect::<Vec<_>>()
        })?;
    let sources: Vec<(Arc<CatalogTable>, String)> = plans
        .iter()
        .filter_map(|p| match &p.source {
            SourceSpec::Table(t) => Some((t.clone(), p.id.clone())),
            SourceSpec::Values(_) => None,
        })
        .collect();
    // A job of its own, never the one of an INSERT (its subscriptions are dropped at the end).
    let job_id = format!(
        "sql-shell-{}-select-{}",
        std::process::id(),
        SELECTS.fetch_add(1, Ordering::Relaxed) + 1
    );
    let mut settings = catalog.settings.clone();
    settings.checkpoint_dir = None;
    let metrics = Metrics::new().map_err(|e| vec![format!("metrics: {e:#}")])?;
    let (stop_tx, stop_rx) = watch::channel(false);
    // Ctrl-C from here on stops the query (the line editor is not reading: the terminal sends SIGINT).
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| vec![format!("Ctrl-C: {e}")])?;
    let opts = RunOptions {
        job_id: job_id.clone(),
        state_dir: None,
        fresh: true,
        progress: false,
    };
    let mut task =
        tokio::spawn(async move { runtime::run(plans, &settings, opts, metrics, stop_rx).await });

    let widths = tableau::widths_by_type(&fields, session.max_width);
    let line = tableau::border(&widths);
    let mut header = vec![tableau::ROW_KIND.to_string()];
    header.extend(fields.iter().map(|f| f.name().clone()));
    let _ = writeln!(out, "{line}\n{}\n{line}", tableau::row(&header, &widths));
    let _ = out.flush();
    let mut rows = 0u64;
    let mut cancelled = false;
    let mut ended = None;
    while ended.is_none() {
        tokio::select! {
            batch = rows_rx.recv() => match batch {
                Some(b) => rows += print_batch(&b, &widths, out),
                None => ended = Some((&mut task).await),
            },
            _ = interrupt.recv() => {
                // Once is enough: the pipeline takes its final checkpoint and drains, so that its
                // subscriptions can be dropped (an aborted pipeline would leave them behind).
                if !cancelled {
                    cancelled = true;
                    let _ = stop_tx.send(true);
                }
            }
            r = &mut task => ended = Some(r),
        }
    }
    while let Ok(b) = rows_rx.try_recv() {
        rows += print_batch(&b, &widths, out);
    }
    if cancelled {
        // The terminal echoed `^C` where the cursor was.
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "{line}");
    let _ = if cancelled {
        writeln!(
            out,
            "Query terminated, received a total of {rows} row{}",
            plural(rows)
        )
    } else {
        writeln!(out, "Received a total of {rows} row{}", plural(rows))
    };
    let _ = out.flush();
    let mut errors = Vec::new();
    match ended {
        Some(Ok(Err(e))) => errors.push(format!("SELECT: {e:#}")),
        Some(Err(e)) if !e.is_cancelled() => errors.push(format!("SELECT: {e}")),
        _ => {}
    }
    // Nothing of the query stays on the broker; a broker that does not answer is not waited for
    // long, and Ctrl-C stops waiting.
    let attempts = if errors.is_empty() { 10 } else { 1 };
    tokio::select! {
        r = tokio::time::timeout(DROP_WAIT, drop_subscriptions(&job_id, &sources, attempts)) => match r {
            Ok(e) => errors.extend(e),
            Err(_) => errors.push(format!(
                "SELECT: the query's subscriptions (named after '{job_id}') could not be dropped within {} s; `pulsar-connect subscriptions` lists what a job keeps",
                DROP_WAIT.as_secs()
            )),
        },
        _ = interrupt.recv() => errors.push(format!(
            "SELECT: not waiting for the query's subscriptions (named after '{job_id}') to be dropped: they may stay on the broker"
        )),
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// How long the shell waits for a query's subscriptions to be dropped.
const DROP_WAIT: Duration = Duration::from_secs(20);

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn print_batch(batch: &RecordBatch, widths: &[usize], out: &mut dyn Write) -> u64 {
    let kinds = changelog::kinds(batch);
    let values = batch.num_columns() - usize::from(kinds.is_some());
    let mut text = String::new();
    for r in 0..batch.num_rows() {
        let mut cells = vec![changelog::kind_at(kinds, r).short_string().to_string()];
        cells.extend(
            batch.columns()[..values]
                .iter()
                .map(|c| tableau::value(c, r)),
        );
        text.push_str(&tableau::row(&cells, widths));
        text.push('\n');
    }
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    batch.num_rows() as u64
}

/// Drops what the query's sources keep on the broker (their subscriptions); the consumers may take a
/// moment to be gone after the pipeline ended, so a refusal is tried again.
async fn drop_subscriptions(
    job_id: &str,
    sources: &[(Arc<CatalogTable>, String)],
    attempts: u32,
) -> Vec<String> {
    if sources.is_empty() {
        return Vec::new();
    }
    let mut last = None;
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        match crate::cli::subscriptions::of_sources(job_id, sources, true).await {
            Ok(lines) => {
                for l in lines {
                    tracing::debug!("SELECT: {l}");
                }
                return Vec::new();
            }
            Err(e) => last = Some(e),
        }
    }
    last.map(|e| {
        vec![format!(
            "SELECT: the query's subscriptions could not be dropped: {e:#}"
        )]
    })
    .unwrap_or_default()
}
