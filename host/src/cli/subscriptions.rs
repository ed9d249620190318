//! `pulsar-connect subscriptions job.sql [--drop]`: what the job's sources keep on the broker between runs
//! (durable subscriptions named after the job), and removing it when the job is retired or must start over.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::connector_api::{CatalogTable, PipelineContext};
use crate::job::Job;
use crate::planner::SourceSpec;

/// One line per subscription found (or dropped), per INSERT.
pub async fn run(job: &Job, drop: bool) -> Result<Vec<String>> {
    let sources: Vec<(Arc<CatalogTable>, String)> = job
        .plans
        .iter()
        .filter_map(|plan| match &plan.source {
            SourceSpec::Table(t) => Some((t.clone(), plan.id.clone())),
            SourceSpec::Values(_) => None,
        })
        .collect();
    of_sources(&job.job_id, &sources, drop).await
}

/// The same for the tables read by the INSERTs (table, pipeline id) of the job `job_id` (the SQL shell
/// drops what a transient `SELECT` left, after its pipeline ended).
pub async fn of_sources(
    job_id: &str,
    sources: &[(Arc<CatalogTable>, String)],
    drop: bool,
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for (table, pipeline) in sources {
        let mut source = table.create_source()?;
        let ctx = PipelineContext::detached(job_id, pipeline);
        source.set_context(&ctx);
        let found = source
            .durable_state(drop)
            .await
            .with_context(|| format!("INSERT {pipeline}"))?;
        lines.extend(found.into_iter().map(|l| format!("INSERT {pipeline}: {l}")));
    }
    Ok(lines)
}
