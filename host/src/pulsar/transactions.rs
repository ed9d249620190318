//! Ending transactions by id: what an exactly-once sink needs when it restarts.
//!
//! A checkpoint records the id of the transaction it pre-committed; after a crash the restarted job must
//! commit that transaction (it may already be committed) and abort the one that was open when it died. The
//! client façade can only end a transaction it opened itself, so recovery uses its own connection to the
//! transaction coordinator.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use magnetar::ConnectionConfig;
use magnetar::proto::{TxnAction, TxnId};
use magnetar::runtime_tokio::{Client, ParsedUrl, Scheme};

use super::client::{ClientConfig, redact, rustls_config, with_tls_hint};
use super::errors::{self, Failure};

/// A transaction id as checkpoints store it: `most:least`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnRef(pub TxnId);

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0.most_sig_bits, self.0.least_sig_bits)
    }
}

impl FromStr for TxnRef {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let (most, least) = s
            .split_once(':')
            .with_context(|| format!("invalid transaction id '{s}' (expected most:least)"))?;
        Ok(TxnRef(TxnId::new(
            most.trim()
                .parse()
                .with_context(|| format!("invalid transaction id '{s}'"))?,
            least
                .trim()
                .parse()
                .with_context(|| format!("invalid transaction id '{s}'"))?,
        )))
    }
}

/// How ending a transaction turned out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Ended now as asked.
    Done,
    /// The coordinator no longer knows it: it already ended (committed or aborted earlier) or it expired
    /// (its timeout passed, so the broker aborted it). The reason is the broker's.
    Unknown(String),
}

/// How many times [`TxnCoordinator`] asks to end a transaction before it gives up on a failure, and the
/// first pause between two asks (doubled each time: 0.25 + 0.5 + 1 + 2 s).
const END_RETRIES: u32 = 5;
const END_BACKOFF: Duration = Duration::from_millis(250);

/// A connection to the transaction coordinator for ending transactions by id.
pub struct TxnCoordinator {
    client: Client,
}

impl TxnCoordinator {
    pub async fn connect(config: &ClientConfig) -> Result<TxnCoordinator> {
        let what = || {
            format!(
                "connecting to the transaction coordinator at {}",
                config.service_url
            )
        };
        // The same authentication (one OAuth2 token shared with the table's client) and the same TLS
        // settings as `client::connect`.
        let auth: Option<Arc<dyn magnetar::AuthProvider>> = config
            .auth
            .provider(&config.tls)
            .await
            .map_err(|e| anyhow!("{}: {e}", what()))?;
        let url = ParsedUrl::parse(&config.service_url).with_context(what)?;
        // The same rustls configuration as the table's client (trust, verifier, client certificate).
        let tls = match url.scheme {
            Scheme::Plain => None,
            Scheme::Tls => {
                Some(rustls_config(&config.tls).map_err(|e| anyhow!("{}: {e}", what()))?)
            }
        };
        // The CONNECT carries the credentials (the provider only answers the broker's challenges).
        let mut conn = ConnectionConfig::default();
        if let Some(provider) = &auth {
            conn.auth_method_name = provider.method().to_owned();
            conn.auth_data =
                Some(provider.initial().map_err(|e| {
                    anyhow!("{}: {}", what(), redact(&e.to_string(), &config.auth))
                })?);
        }
        let client = Client::connect_with(url, tls, conn, auth)
            .await
            .map_err(|e| {
                anyhow!(
                    "{}: {}",
                    what(),
                    redact(&with_tls_hint(e.to_string(), config), &config.auth)
                )
            })?;
        // The coordinator handshake happens on the first new transaction: open and abort one.
        let probe = client.new_txn(Duration::from_secs(30)).await.context(
            "opening a transaction (is transactionCoordinatorEnabled=true on the broker?)",
        )?;
        client
            .end_txn(probe, TxnAction::Abort)
            .await
            .context("aborting the probe transaction")?;
        Ok(TxnCoordinator { client })
    }

    pub async fn commit(&self, txn: TxnRef) -> Result<EndOutcome> {
        self.end(txn, TxnAction::Commit).await
    }

    pub async fn abort(&self, txn: TxnRef) -> Result<EndOutcome> {
        self.end(txn, TxnAction::Abort).await
    }

    /// Ends `txn`. A failure that is neither success nor "no longer open" is asked again a few times
    /// ([`END_RETRIES`]): the coordinator keeps a transaction it could not end on every partition and
    /// subscription in its committing / aborting state and sends the end again when asked again, and some
    /// of these failures are the broker's own and pass (Pulsar 4.0's pending-ack handle fails a second
    /// concurrent abort of a transaction that acknowledged cumulatively with a `NullPointerException`, which
    /// the restarted subtasks of one job hit when they abort what an earlier run left open together).
    async fn end(&self, txn: TxnRef, action: TxnAction) -> Result<EndOutcome> {
        let mut backoff = END_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.client.end_txn(txn.0, action).await {
                Ok(_) => return Ok(EndOutcome::Done),
                Err(e) => match errors::classify_client(&e) {
                    Failure::TransactionGone => return Ok(EndOutcome::Unknown(e.to_string())),
                    _ if attempt < END_RETRIES => {
                        tracing::warn!(txn = %txn, action = ?action, attempt, "ending the transaction failed, asking again in {backoff:?}: {e}");
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                        attempt += 1;
                    }
                    _ => bail!(
                        "ending transaction {txn} ({action:?}) failed ({attempt} attempts): {e}"
                    ),
                },
            }
        }
    }

    pub async fn close(self) {
        self.client.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_as_text() {
        let t: TxnRef = "1:42".parse().unwrap();
        assert_eq!(t.0, TxnId::new(1, 42));
        assert_eq!(t.to_string(), "1:42");
        assert!("142".parse::<TxnRef>().is_err());
        assert!("a:1".parse::<TxnRef>().is_err());
    }
}
