//! `pulsar-connect subscriptions job.sql [--drop]`: what the job's sources keep on the broker between runs
//! (durable subscriptions named after the job), and removing it when the job is retired or must start over.

use anyhow::{Context, Result};

use crate::connector_api::PipelineContext;
use crate::job::Job;
use crate::planner::SourceSpec;

/// One line per subscription found (or dropped), per INSERT.
pub async fn run(job: &Job, drop: bool) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for plan in &job.plans {
        let SourceSpec::Table(t) = &plan.source else {
            continue;
        };
        let mut source = t.create_source()?;
        let ctx = PipelineContext::detached(&job.job_id, &plan.id);
        source.set_context(&ctx);
        let found = source
            .durable_state(drop)
            .await
            .with_context(|| format!("INSERT {}", plan.id))?;
        lines.extend(
            found
                .into_iter()
                .map(|l| format!("INSERT {}: {l}", plan.id)),
        );
    }
    Ok(lines)
}
