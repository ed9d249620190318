//! The planner: one pipeline per INSERT.
//!
//! The query of an INSERT is planned by DataFusion's SQL planner against the job's tables (each registered as an
//! empty in-memory table with its source schema; a table with computed columns is a view that computes them).
//! The optimised logical plan must be a chain of projections and filters over one table scan — anything
//! stateful is refused. The chain becomes per-batch [`Transform`] stages built from DataFusion physical
//! expressions; a last step maps the query's columns onto the sink's columns (implicit casts, NULL for columns
//! not listed, NOT NULL enforcement).

mod naming;
mod transform;
mod type_planner;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::catalog::MemTable;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::{ViewTable, provider_as_source};
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, TableScan, col};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::catalog::{Catalog, CatalogTable};
use crate::sql::{ColumnKind, Insert, Pos, RowKind};

pub use transform::{Stage, Transform};

/// Where a pipeline's rows come from.
pub enum SourceSpec {
    Table(Arc<CatalogTable>),
    /// `VALUES` (or a SELECT without FROM), evaluated at planning time.
    Values(Vec<RecordBatch>),
}

/// One INSERT, ready to run.
pub struct PipelinePlan {
    pub index: usize,
    /// Stable key of the pipeline inside checkpoints: `<index>:<sink table>`.
    pub id: String,
    pub pos: Pos,
    pub source: SourceSpec,
    pub sink: Arc<CatalogTable>,
    pub transform: Arc<Transform>,
    /// The optimised logical plan, for `validate`.
    pub explain: String,
}

impl PipelinePlan {
    pub fn source_name(&self) -> String {
        match &self.source {
            SourceSpec::Table(t) => t.name().to_string(),
            SourceSpec::Values(_) => "VALUES".to_string(),
        }
    }
}

/// The DataFusion session the planner uses: identifiers are case-sensitive as in Flink, and the target type of a
/// CAST is a Flink type ([`type_planner`]).
pub fn session() -> SessionContext {
    let mut config = SessionConfig::new()
        .with_target_partitions(1)
        .with_information_schema(false);
    config.options_mut().sql_parser.enable_ident_normalization = false;
    config.options_mut().execution.time_zone = Some("UTC".into());
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_type_planner(Arc::new(type_planner::FlinkTypePlanner))
        .build();
    SessionContext::new_with_state(state)
}

fn base_name(table: &str) -> String {
    format!("{table}$source")
}

/// Registers every table: a scan of its source schema, plus a view computing computed columns.
fn register_tables(
    ctx: &SessionContext,
    catalog: &Catalog,
) -> Result<BTreeMap<String, Arc<CatalogTable>>> {
    let mut scans = BTreeMap::new();
    for name in &catalog.order {
        let t = &catalog.tables[name];
        let schema = t.source_schema();
        let mem = Arc::new(MemTable::try_new(schema.clone(), vec![vec![]])?);
        let has_computed = t
            .def
            .columns
            .iter()
            .any(|c| matches!(c.kind, ColumnKind::Computed { .. }));
        if !has_computed {
            ctx.register_table(datafusion::common::TableReference::bare(name.as_str()), mem)?;
            scans.insert(name.clone(), t.clone());
            continue;
        }
        let base = base_name(name);
        let scan = LogicalPlanBuilder::scan(
            datafusion::common::TableReference::bare(base.as_str()),
            provider_as_source(mem),
            None,
        )?
        .build()?;
        let df_schema = scan.schema().clone();
        let mut exprs: Vec<Expr> = Vec::new();
        for c in &t.def.columns {
            match &c.kind {
                ColumnKind::Computed { expr, flink_text } => {
                    let e = ctx.parse_sql_expr(expr, &df_schema).map_err(|e| {
                        anyhow!(
                            "{}: table '{name}', computed column '{}' AS {flink_text}: {}",
                            c.pos,
                            c.name,
                            short(&e)
                        )
                    })?;
                    exprs.push(e.alias(&c.name));
                }
                _ => exprs.push(col(datafusion::common::Column::new(
                    Some(datafusion::common::TableReference::bare(base.as_str())),
                    &c.name,
                ))),
            }
        }
        let plan = LogicalPlanBuilder::from(scan)
            .project(exprs)
            .map_err(|e| {
                anyhow!(
                    "{}: table '{name}': computed columns: {}",
                    t.def.pos,
                    short(&e)
                )
            })?
            .build()?;
        ctx.register_table(
            datafusion::common::TableReference::bare(name.as_str()),
            Arc::new(ViewTable::new(plan, None)),
        )?;
        scans.insert(base, t.clone());
    }
    Ok(scans)
}

/// DataFusion error text without the `Error during planning:` style prefixes repeated.
pub fn short(e: &datafusion::error::DataFusionError) -> String {
    e.to_string()
}

/// Plans every INSERT of the job. Errors are collected (one per INSERT).
pub async fn plan_job(
    catalog: &Catalog,
    inserts: &[&Insert],
) -> std::result::Result<Vec<PipelinePlan>, Vec<anyhow::Error>> {
    let ctx = session();
    let scans = match register_tables(&ctx, catalog) {
        Ok(s) => s,
        Err(e) => return Err(vec![e]),
    };
    let mut plans = Vec::new();
    let mut errors = Vec::new();
    for (index, insert) in inserts.iter().enumerate() {
        match plan_insert(&ctx, catalog, &scans, index, insert).await {
            Ok(p) => plans.push(p),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(plans)
    } else {
        Err(errors)
    }
}

/// The columns a bare query produces over the catalog's tables (the SQL shell's `SELECT`, which runs as
/// a pipeline into a sink of exactly these columns), checked as an INSERT's query is.
pub async fn query_schema(catalog: &Catalog, query: &str, qpos: Pos) -> Result<SchemaRef> {
    let ctx = session();
    register_tables(&ctx, catalog)?;
    let state = ctx.state();
    let plan = naming::plan_query(&state, query)
        .await
        .map_err(|e| anyhow!("{qpos}: SELECT: {}", short(&e)))?;
    let plan = match stateful_node(&plan) {
        None => state
            .optimize(&plan)
            .map_err(|e| anyhow!("{qpos}: SELECT: {}", short(&e)))?,
        Some(_) => plan,
    };
    if let Some(what) = stateful_node(&plan) {
        bail!(
            "{qpos}: SELECT: {what} is not supported: pulsar-connect runs stateless queries only (projection, filter, CAST, scalar functions, computed columns), each batch processed on its own without state across rows"
        );
    }
    Ok(Arc::new(plan.schema().as_arrow().clone()))
}

/// The first stateful node of a plan, with the reason it cannot run here.
fn stateful_node(plan: &LogicalPlan) -> Option<String> {
    let mut found = None;
    let _ = plan.apply(|node| {
        let what = match node {
            LogicalPlan::Aggregate(_) => Some("GROUP BY / aggregate functions (an aggregate keeps per-key state across rows)"),
            LogicalPlan::Distinct(_) => Some("SELECT DISTINCT (deduplication keeps every row seen)"),
            LogicalPlan::Join(_) => Some("JOIN (a join keeps the rows of both inputs)"),
            LogicalPlan::Window(_) => Some("OVER windows (a window keeps the rows of its frame)"),
            LogicalPlan::Sort(_) => Some("ORDER BY (sorting an unbounded stream needs all of it)"),
            LogicalPlan::Limit(_) => Some("LIMIT / FETCH (a limit counts rows across the whole stream)"),
            LogicalPlan::Union(_) => Some("UNION (one INSERT reads one table here; write one INSERT per input in a statement set)"),
            LogicalPlan::Subquery(_) | LogicalPlan::RecursiveQuery(_) => Some("subqueries"),
            LogicalPlan::Unnest(_) => Some("UNNEST / CROSS JOIN UNNEST"),
            _ => None,
        };
        if let Some(w) = what {
            found = Some(w.to_string());
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

async fn plan_insert(
    ctx: &SessionContext,
    catalog: &Catalog,
    scans: &BTreeMap<String, Arc<CatalogTable>>,
    index: usize,
    insert: &Insert,
) -> Result<PipelinePlan> {
    let sink = catalog
        .get(&insert.table)
        .ok_or_else(|| catalog.unknown_table(&insert.table, insert.pos))?
        .clone();
    let at = insert.pos;
    if !sink.writable() {
        bail!(
            "{at}: INSERT INTO {}: connector '{}' cannot be written to (it is a source only)",
            sink.name(),
            sink.connector
        );
    }
    // The columns written: explicitly listed or every persisted column (physical and non-virtual metadata).
    let persisted: Vec<String> = sink.sink_columns().map(|c| c.name.clone()).collect();
    let targets: Vec<String> = match &insert.columns {
        Some(cols) => {
            for c in cols {
                let Some(def) = sink.def.columns.iter().find(|d| &d.name == c) else {
                    bail!(
                        "{at}: INSERT INTO {}: unknown target column '{c}'; columns: {}",
                        sink.name(),
                        persisted.join(", ")
                    );
                };
                match &def.kind {
                    ColumnKind::Metadata {
                        is_virtual: true, ..
                    } => bail!(
                        "{at}: INSERT INTO {}: column '{c}' is a VIRTUAL metadata column and cannot be written (VIRTUAL columns are read-only; remove VIRTUAL from the declaration if the connector can write this metadata)",
                        sink.name()
                    ),
                    ColumnKind::Computed { .. } => bail!(
                        "{at}: INSERT INTO {}: column '{c}' is a computed column and cannot be written",
                        sink.name()
                    ),
                    _ => {}
                }
                if cols.iter().filter(|x| *x == c).count() > 1 {
                    bail!(
                        "{at}: INSERT INTO {}: target column '{c}' is listed twice",
                        sink.name()
                    );
                }
            }
            cols.clone()
        }
        None => persisted.clone(),
    };
    // Persisted metadata columns must be writable by the connector (keys it resolves itself, such as a
    // format's metadata, are read-only).
    for c in sink.sink_columns() {
        if let Some(key) = sink.metadata_key(c)
            && !sink
                .factory
                .metadata()
                .iter()
                .any(|m| m.key == key && m.writable)
        {
            bail!(
                "{at}: INSERT INTO {}: metadata column '{}' (key '{key}') is read-only for connector '{}'; declare it VIRTUAL so that INSERT INTO skips it",
                sink.name(),
                c.name,
                sink.connector
            );
        }
    }

    let qpos = insert.query_pos;
    let state = ctx.state();
    let plan = naming::plan_query(&state, &insert.query)
        .await
        .map_err(|e| anyhow!("{qpos}: INSERT INTO {}: {}", sink.name(), short(&e)))?;
    if let Some(what) = stateful_node(&plan) {
        bail!(
            "{qpos}: INSERT INTO {}: {what} is not supported: pulsar-connect runs stateless queries only (projection, filter, CAST, scalar functions, computed columns), each batch processed on its own without state across rows",
            sink.name()
        );
    }
    let plan = state
        .optimize(&plan)
        .map_err(|e| anyhow!("{qpos}: INSERT INTO {}: {}", sink.name(), short(&e)))?;
    if let Some(what) = stateful_node(&plan) {
        bail!(
            "{qpos}: INSERT INTO {}: {what} is not supported: pulsar-connect runs stateless queries only",
            sink.name()
        );
    }
    let explain = plan.display_indent().to_string();

    // Output columns vs target columns.
    let out_schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
    if out_schema.fields().len() != targets.len() {
        bail!(
            "{at}: INSERT INTO {}: column count mismatch: the query produces {} column(s) [{}] but the sink expects {} [{}]",
            sink.name(),
            out_schema.fields().len(),
            out_schema
                .fields()
                .iter()
                .map(|f| format!("{}: {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", "),
            targets.len(),
            targets.join(", ")
        );
    }
    let sink_schema = sink.sink_schema();
    let mut mapping: Vec<Option<usize>> = vec![None; sink_schema.fields().len()];
    for (qi, target) in targets.iter().enumerate() {
        let si = sink_schema.index_of(target)?;
        let (from, to) = (
            out_schema.field(qi).data_type(),
            sink_schema.field(si).data_type(),
        );
        if !transform::compatible(from, to) {
            bail!(
                "{at}: INSERT INTO {}: incompatible types for sink column '{target}' at position {qi}: the query produces {from}, the column is {} ({to}); add an explicit CAST",
                sink.name(),
                sink.def
                    .columns
                    .iter()
                    .find(|c| &c.name == target)
                    .map(|c| match &c.kind {
                        ColumnKind::Physical(t) | ColumnKind::Metadata { ty: t, .. } =>
                            t.to_string(),
                        _ => String::new(),
                    })
                    .unwrap_or_default()
            );
        }
        mapping[si] = Some(qi);
    }
    for (si, m) in mapping.iter().enumerate() {
        let f = sink_schema.field(si);
        if m.is_none() && !f.is_nullable() {
            bail!(
                "{at}: INSERT INTO {}: column '{}' is NOT NULL and must be listed in the INSERT column list",
                sink.name(),
                f.name()
            );
        }
    }

    // Source and stages.
    let mut chain = Vec::new();
    let mut node = &plan;
    let mut scan = None;
    loop {
        match node {
            LogicalPlan::Projection(p) => {
                chain.push(node);
                node = p.input.as_ref();
            }
            LogicalPlan::Filter(f) => {
                chain.push(node);
                node = f.input.as_ref();
            }
            LogicalPlan::SubqueryAlias(a) => node = a.input.as_ref(),
            LogicalPlan::TableScan(ts) => {
                scan = Some(ts);
                break;
            }
            LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => break,
            other => bail!(
                "{qpos}: INSERT INTO {}: unsupported query shape ({}); only projections and filters over one table are supported",
                sink.name(),
                other.display()
            ),
        }
    }
    chain.reverse();
    let transform = Arc::new(Transform::build(
        &state,
        scan,
        &chain,
        sink_schema.clone(),
        mapping,
        catalog.settings.drop_null_violations,
        sink.name(),
    )?);
    let source = match scan {
        Some(ts) => {
            let name = ts.table_name.table().to_string();
            let table = scans
                .get(&name)
                .ok_or_else(|| {
                    anyhow!(
                        "{qpos}: INSERT INTO {}: unknown table '{name}'",
                        sink.name()
                    )
                })?
                .clone();
            if !table.readable() {
                bail!(
                    "{qpos}: INSERT INTO {}: table '{}' (connector '{}') cannot be read from (it is a sink only)",
                    sink.name(),
                    table.name(),
                    table.connector
                );
            }
            check_changelog(&table, &sink, ts).map_err(|e| anyhow!("{qpos}: {e}"))?;
            SourceSpec::Table(table)
        }
        None => {
            // Constant rows: evaluate them now.
            let df = ctx
                .execute_logical_plan(plan.clone())
                .await
                .map_err(|e| anyhow!("{qpos}: INSERT INTO {}: {}", sink.name(), short(&e)))?;
            let batches = df
                .collect()
                .await
                .map_err(|e| anyhow!("{qpos}: INSERT INTO {}: {}", sink.name(), short(&e)))?;
            // Apply the final mapping now so that type errors show up in `validate`.
            let mut out = Vec::new();
            for b in batches {
                let (mapped, _) = transform
                    .finish(b, None)
                    .map_err(|e| anyhow!("{qpos}: INSERT INTO {}: {e:#}", sink.name()))?;
                out.push(mapped);
            }
            SourceSpec::Values(out)
        }
    };
    let transform = match source {
        SourceSpec::Values(_) => Arc::new(Transform::identity(sink_schema)),
        _ => transform,
    };
    let mut explain_full = String::new();
    writeln!(
        explain_full,
        "INSERT #{index} (line {}): {} → {} (connector '{}')",
        at.line,
        match &source {
            SourceSpec::Table(t) => format!("{} (connector '{}')", t.name(), t.connector),
            SourceSpec::Values(b) => format!(
                "VALUES ({} rows)",
                b.iter().map(|b| b.num_rows()).sum::<usize>()
            ),
        },
        sink.name(),
        sink.connector
    )
    .ok();
    for line in explain.lines() {
        writeln!(explain_full, "    {line}").ok();
    }
    Ok(PipelinePlan {
        index,
        id: format!("{index}:{}", sink.name()),
        pos: at,
        source,
        sink,
        transform,
        explain: explain_full,
    })
}

/// Refuses an INSERT whose source produces row kinds its sink cannot take, with Flink's reason (its
/// `FlinkChangelogModeInferenceProgram`), so a sink never receives them (ADR 0016).
fn check_changelog(source: &CatalogTable, sink: &CatalogTable, scan: &TableScan) -> Result<()> {
    let produced = source.changelog_mode();
    let accepted = sink.accepted_changelog_mode();
    if accepted.covers(produced) {
        return Ok(());
    }
    let updates = [RowKind::UpdateBefore, RowKind::UpdateAfter]
        .into_iter()
        .any(|k| produced.contains(k) && !accepted.contains(k));
    let deletes = produced.contains(RowKind::Delete) && !accepted.contains(RowKind::Delete);
    let changes = match (updates, deletes) {
        (true, true) => "update and delete changes",
        (true, false) => "update changes",
        _ => "delete changes",
    };
    let fields: Vec<&str> = scan
        .projected_schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    bail!(
        "Table sink '{}' doesn't support consuming {changes} which is produced by node TableSourceScan(table=[[{}]], fields=[{}]) (table '{}' produces {produced}; connector '{}' of table '{}' accepts {accepted})",
        sink.name(),
        source.name(),
        fields.join(", "),
        source.name(),
        sink.connector,
        sink.name()
    )
}
