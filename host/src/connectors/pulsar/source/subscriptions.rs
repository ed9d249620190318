//! What a source keeps on the broker between runs: the job's subscription on every split, listed and
//! dropped by `pulsar-connect subscriptions [--drop]`.

use anyhow::{Context as _, Result, bail};

use super::PulsarSource;
use super::connect::subscription_exists;
use crate::connectors::pulsar::config::Startup;
use crate::pulsar::admin;

impl PulsarSource {
    /// What the job keeps on the broker for this table (its subscription on every split), dropped when
    /// `drop` is set.
    pub(super) async fn durable_subscriptions(&mut self, drop: bool) -> Result<Vec<String>> {
        let cfg = self.spec.cfg.clone();
        if matches!(
            self.spec.cfg.source.startup,
            Startup::ExternalSubscription { .. }
        ) {
            return Ok(vec![format!(
                "table '{}': reads the external subscription '{}' (not the job's; left alone)",
                cfg.table, self.subscription
            )]);
        }
        let Some(url) = cfg.admin_url.clone() else {
            bail!(
                "table '{}': listing or dropping the job's subscriptions needs 'admin-url'",
                cfg.table
            );
        };
        let client = crate::pulsar::connect(&cfg.client).await?;
        let admin = admin::admin_client_for(&url, &cfg.client).await?;
        let splits = cfg
            .source
            .selection
            .splits(&client, Some(&admin))
            .await
            .with_context(|| format!("table '{}': listing the topics", cfg.table))?;
        client.close().await;
        let mut out = Vec::new();
        for split in &splits {
            if !subscription_exists(&url, &cfg.client, split, &self.subscription).await? {
                continue;
            }
            let what = format!("{} subscription '{}'", split.topic, self.subscription);
            if drop {
                admin::delete_subscription(&url, &cfg.client, &split.topic, &self.subscription)
                    .await
                    .with_context(|| {
                        format!(
                            "table '{}': dropping {what} (is the job still running?)",
                            cfg.table
                        )
                    })?;
                out.push(format!("dropped {what}"));
            } else {
                out.push(what);
            }
        }
        Ok(out)
    }
}
