//! The admin REST client (optional: `admin-url`), for what the binary protocol does not offer, and the typed
//! calls the connectors make (subscriptions, retention state, open transactions): paths and answers in one place.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, anyhow};
use magnetar::admin::AdminClient;

use super::client::{Authentication, ClientConfig, redact};
use super::topics::TopicName;

/// Builds an admin client for `admin_url`, with the token when there is one. Errors name the URL, never
/// the token.
pub fn admin_client(admin_url: &str, token: Option<&str>) -> Result<AdminClient> {
    let url =
        url::Url::parse(admin_url).with_context(|| format!("invalid admin-url '{admin_url}'"))?;
    let mut b = AdminClient::builder().service_url(url);
    if let Some(token) = token {
        b = b.token(token.to_owned());
    }
    b.build()
        .with_context(|| format!("creating the admin client for {admin_url}"))
}

/// Builds an admin client for `admin_url` with the table's authentication (token, or the OAuth2 flow
/// its client uses: the access token is refreshed on demand) and TLS settings (`https://`: the trust
/// certificates are added to the system's; `tls-allow-insecure-connection` accepts any certificate; the
/// host name is always verified otherwise; the client certificate is presented to a broker that asks
/// for one). Errors name the URL, never a secret.
pub async fn admin_client_for(admin_url: &str, config: &ClientConfig) -> Result<AdminClient> {
    let url =
        url::Url::parse(admin_url).with_context(|| format!("invalid admin-url '{admin_url}'"))?;
    let mut b = AdminClient::builder().service_url(url);
    match &config.auth {
        Authentication::None | Authentication::Tls => {}
        Authentication::Token(token) => b = b.token(token.clone()),
        Authentication::OAuth2(o) => {
            let flow = o
                .flow(&config.tls)
                .await
                .map_err(|e| anyhow!("creating the admin client for {admin_url}: {e}"))?;
            b = b.oauth2(flow);
        }
    }
    if admin_url.starts_with("https://") {
        if let Some(pem) = &config.tls.trust_certs_pem {
            b = b.tls_trust_cert_pem(pem.as_slice().to_vec());
        }
        b = b.tls_allow_insecure(config.tls.allow_insecure);
        if let Some(cert) = &config.tls.client_cert {
            let identity = cert
                .identity()
                .map_err(|e| anyhow!("creating the admin client for {admin_url}: {e}"))?;
            b = b.tls_identity(identity);
        }
    }
    b.build().map_err(|e| {
        anyhow!(
            "creating the admin client for {admin_url}: {}",
            redact(&e.to_string(), &config.auth)
        )
    })
}

/// A plain HTTP client for admin calls the admin client lacks, with the table's TLS settings, and the
/// bearer token to send (OAuth2: the current access token).
pub async fn rest_client(config: &ClientConfig) -> Result<(reqwest::Client, Option<String>)> {
    let token = match &config.auth {
        Authentication::None | Authentication::Tls => None,
        Authentication::Token(t) => Some(t.clone()),
        Authentication::OAuth2(o) => {
            let flow = o.flow(&config.tls).await.map_err(|e| anyhow!("{e}"))?;
            flow.cached_access_token()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
        }
    };
    magnetar::runtime_tokio::tls_crypto::install_default_provider();
    let mut b = reqwest::Client::builder();
    if let Some(pem) = &config.tls.trust_certs_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| anyhow!("option 'tls-trust-certs-file-path': {e}"))?
        {
            b = b.add_root_certificate(cert);
        }
    }
    if config.tls.allow_insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    if let Some(cert) = &config.tls.client_cert {
        b = b.identity(cert.identity().map_err(|e| anyhow!("{e}"))?);
    }
    Ok((b.build().context("creating an HTTP client")?, token))
}

/// `GET {admin_url}{path}` as JSON, with the table's authentication and TLS settings (for the calls
/// `AdminClient` lacks). Errors name the URL and the broker's answer, never a secret.
pub async fn get_json(
    admin_url: &str,
    config: &ClientConfig,
    path: &str,
) -> Result<serde_json::Value> {
    let (url, resp) = request(reqwest::Method::GET, admin_url, config, path).await?;
    resp.json()
        .await
        .with_context(|| format!("GET {url}: the answer is not JSON"))
}

/// `DELETE {admin_url}{path}`, with the table's authentication and TLS settings. Errors name the URL
/// and the broker's answer, never a secret.
pub async fn delete(admin_url: &str, config: &ClientConfig, path: &str) -> Result<()> {
    request(reqwest::Method::DELETE, admin_url, config, path).await?;
    Ok(())
}

/// Sends one admin REST request; a non-success answer is an error with the (redacted) body.
async fn request(
    method: reqwest::Method,
    admin_url: &str,
    config: &ClientConfig,
    path: &str,
) -> Result<(String, reqwest::Response)> {
    send(method, admin_url, config, path, None).await
}

/// [`request`] with a JSON body.
async fn send(
    method: reqwest::Method,
    admin_url: &str,
    config: &ClientConfig,
    path: &str,
    json: Option<String>,
) -> Result<(String, reqwest::Response)> {
    let url = format!("{}{path}", admin_url.trim_end_matches('/'));
    let (http, token) = rest_client(config).await?;
    let mut req = http.request(method.clone(), &url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(body) = json {
        req = req
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("{method} {url}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        anyhow::bail!(
            "{method} {url} answered {status}: {}",
            redact(body.trim(), &config.auth)
        );
    }
    Ok((url, resp))
}

// ---- Typed admin calls: the REST paths and answers the connectors use, in one place. ----

/// `persistent://t/n/x` → `t/n/x`; a non-persistent topic has no admin state (`None`).
fn persistent_path(topic: &TopicName) -> Option<&str> {
    topic.as_str().strip_prefix("persistent://")
}

/// A subscription name as one URL path segment (names hold `:` and may hold `/`-free punctuation).
pub fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The subscriptions of a topic (`GET /admin/v2/persistent/{topic}/subscriptions`); none for a
/// non-persistent topic.
pub async fn subscriptions(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
) -> Result<Vec<String>> {
    let Some(path) = persistent_path(topic) else {
        return Ok(Vec::new());
    };
    let subs = get_json(
        admin_url,
        config,
        &format!("/admin/v2/persistent/{path}/subscriptions"),
    )
    .await?;
    Ok(subs
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

/// Deletes a subscription of a persistent topic (`DELETE /admin/v2/persistent/{topic}/subscription/{name}`;
/// the broker refuses while a consumer is connected).
pub async fn delete_subscription(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    subscription: &str,
) -> Result<()> {
    let Some(path) = persistent_path(topic) else {
        return Ok(());
    };
    delete(
        admin_url,
        config,
        &format!(
            "/admin/v2/persistent/{path}/subscription/{}",
            path_segment(subscription)
        ),
    )
    .await
}

/// The names of the consumers connected to `subscription` of `topic`: a partitioned topic's parent
/// (`GET .../partitioned-stats?perPartition=true`, every partition's consumers) or a topic without
/// partitions (`GET .../stats`); none for a non-persistent topic.
pub async fn subscription_consumers(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    partitioned: bool,
    subscription: &str,
) -> Result<BTreeSet<String>> {
    let Some(path) = persistent_path(topic) else {
        return Ok(BTreeSet::new());
    };
    let stats = if partitioned {
        format!("/admin/v2/persistent/{path}/partitioned-stats?perPartition=true")
    } else {
        format!("/admin/v2/persistent/{path}/stats")
    };
    let stats = get_json(admin_url, config, &stats).await?;
    Ok(consumers_in_stats(&stats, subscription))
}

/// The consumer names of `subscription` in a topic's stats (and in each partition's, when listed).
pub fn consumers_in_stats(stats: &serde_json::Value, subscription: &str) -> BTreeSet<String> {
    let of = |stats: &serde_json::Value| -> Vec<String> {
        stats["subscriptions"][subscription]["consumers"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter_map(|c| c["consumerName"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut names: BTreeSet<String> = of(stats).into_iter().collect();
    if let Some(parts) = stats["partitions"].as_object() {
        names.extend(parts.values().flat_map(of));
    }
    names
}

/// The backlog of `subscription` on a persistent topic (a partition or a topic without partitions), as
/// the broker counts it (`msgBacklog` of `GET .../stats?getPreciseBacklog=true`: the messages after the
/// subscription's mark-delete position, counted from the ledgers, not estimated); `None` for a
/// non-persistent topic or when the subscription does not exist.
pub async fn subscription_backlog(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    subscription: &str,
) -> Result<Option<u64>> {
    let Some(path) = persistent_path(topic) else {
        return Ok(None);
    };
    let stats = get_json(
        admin_url,
        config,
        &format!("/admin/v2/persistent/{path}/stats?getPreciseBacklog=true"),
    )
    .await?;
    Ok(backlog_in_stats(&stats, subscription))
}

/// The broker's count of the messages in a subscription's backlog (`POST .../analyzeBacklog`, Pulsar 3.2+):
/// it reads the backlog's entries and counts the messages in them, batches included, up to its
/// `subscriptionBacklogScanMaxEntries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogCount {
    pub entries: u64,
    pub messages: u64,
    /// The broker stopped at its scan limit: `messages` is a lower bound.
    pub aborted: bool,
}

impl BacklogCount {
    pub fn from_json(v: &serde_json::Value) -> Option<BacklogCount> {
        Some(BacklogCount {
            entries: v["entries"].as_u64()?,
            messages: v["messages"].as_u64()?,
            aborted: v["aborted"].as_bool().unwrap_or(false),
        })
    }
}

/// Counts the messages of `subscription`'s backlog on a persistent topic (`None` for a non-persistent
/// one, or an answer without counts).
pub async fn analyze_backlog(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    subscription: &str,
) -> Result<Option<BacklogCount>> {
    let Some(path) = persistent_path(topic) else {
        return Ok(None);
    };
    let (url, resp) = request(
        reqwest::Method::POST,
        admin_url,
        config,
        &format!(
            "/admin/v2/persistent/{path}/subscription/{}/analyzeBacklog",
            path_segment(subscription)
        ),
    )
    .await?;
    let v: serde_json::Value = resp
        .json()
        .await
        .with_context(|| format!("POST {url}: the answer is not JSON"))?;
    Ok(BacklogCount::from_json(&v))
}

/// `msgBacklog` of `subscription` in a topic's stats.
pub fn backlog_in_stats(stats: &serde_json::Value, subscription: &str) -> Option<u64> {
    stats["subscriptions"][subscription]["msgBacklog"].as_u64()
}

/// The path of a topic's properties (`None` for a non-persistent topic).
fn properties_path(topic: &TopicName) -> Option<String> {
    persistent_path(topic).map(|p| format!("/admin/v2/persistent/{p}/properties"))
}

/// A topic's properties (`GET .../properties`; a partitioned topic's are its metadata's).
pub async fn topic_properties(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
) -> Result<BTreeMap<String, String>> {
    let Some(path) = properties_path(topic) else {
        return Ok(BTreeMap::new());
    };
    let v = get_json(admin_url, config, &path).await?;
    Ok(v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default())
}

/// Sets properties of a topic, keeping the others (`PUT .../properties`).
pub async fn set_topic_properties(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    properties: &BTreeMap<String, String>,
) -> Result<()> {
    let Some(path) = properties_path(topic) else {
        anyhow::bail!("{topic} is not persistent: it has no properties");
    };
    let body = serde_json::to_string(properties)?;
    send(reqwest::Method::PUT, admin_url, config, &path, Some(body)).await?;
    Ok(())
}

/// Removes one property of a topic (`DELETE .../properties?key=`).
pub async fn remove_topic_property(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
    key: &str,
) -> Result<()> {
    let Some(path) = properties_path(topic) else {
        return Ok(());
    };
    delete(
        admin_url,
        config,
        &format!("{path}?key={}", path_segment(key)),
    )
    .await
}

/// What a topic's internal stats say about retention.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// The oldest ledger the topic still has.
    pub first_ledger: Option<u64>,
    /// Each cursor's mark-delete position `(ledger, entry)`.
    pub cursors: BTreeMap<String, (u64, i64)>,
}

impl LedgerStats {
    /// From the JSON of `GET /admin/v2/persistent/{topic}/internalStats`.
    pub fn from_json(stats: &serde_json::Value) -> LedgerStats {
        let first_ledger = stats["ledgers"]
            .as_array()
            .and_then(|l| l.first())
            .and_then(|l| l["ledgerId"].as_u64());
        let cursors = stats["cursors"]
            .as_object()
            .map(|c| {
                c.iter()
                    .filter_map(|(name, cursor)| {
                        let (l, e) = cursor["markDeletePosition"].as_str()?.split_once(':')?;
                        Some((name.clone(), (l.parse().ok()?, e.parse().ok()?)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        LedgerStats {
            first_ledger,
            cursors,
        }
    }
}

/// The retention state of a persistent topic (`None` for a non-persistent one).
pub async fn ledger_stats(
    admin_url: &str,
    config: &ClientConfig,
    topic: &TopicName,
) -> Result<Option<LedgerStats>> {
    let Some(path) = persistent_path(topic) else {
        return Ok(None);
    };
    let stats = get_json(
        admin_url,
        config,
        &format!("/admin/v2/persistent/{path}/internalStats"),
    )
    .await?;
    Ok(Some(LedgerStats::from_json(&stats)))
}

/// An open transaction as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTransaction {
    /// `(most, least)` bits of the transaction id.
    pub id: (u64, u64),
    /// Topic → the subscriptions it acknowledged on inside the transaction.
    pub acked: BTreeMap<String, BTreeSet<String>>,
}

/// The answer of [`slow_transactions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlowTransactions {
    Listed(Vec<OpenTransaction>),
    /// Not every transaction coordinator is loaded yet (a fresh broker): the broker's answer.
    CoordinatorNotLoaded(String),
}

/// Every transaction open longer than 0 ms (`GET /admin/v3/transactions/slowTransactions/0`).
pub async fn slow_transactions(admin_url: &str, config: &ClientConfig) -> Result<SlowTransactions> {
    match get_json(
        admin_url,
        config,
        "/admin/v3/transactions/slowTransactions/0",
    )
    .await
    {
        Ok(v) => Ok(SlowTransactions::Listed(open_transactions(&v))),
        // The broker answers 500 with this text until a coordinator is loaded.
        Err(e) if format!("{e:#}").contains("Transaction coordinator not found") => {
            Ok(SlowTransactions::CoordinatorNotLoaded(format!("{e:#}")))
        }
        Err(e) => Err(e),
    }
}

/// The transactions of a `slowTransactions` answer (an object keyed by transaction id), by id.
pub fn open_transactions(slow: &serde_json::Value) -> Vec<OpenTransaction> {
    let Some(all) = slow.as_object() else {
        return Vec::new();
    };
    let mut out: Vec<OpenTransaction> = all
        .iter()
        .filter_map(|(key, meta)| {
            let id = parse_admin_txn_id(meta["txnId"].as_str().unwrap_or(key))?;
            let acked = meta["ackedPartitions"]
                .as_object()
                .map(|topics| {
                    topics
                        .iter()
                        .map(|(t, subs)| {
                            let subs = subs
                                .as_object()
                                .map(|s| s.keys().cloned().collect())
                                .unwrap_or_default();
                            (t.clone(), subs)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(OpenTransaction { id, acked })
        })
        .collect();
    out.sort_by_key(|t| t.id);
    out
}

/// A transaction id as the admin API prints it: `(most,least)`.
pub fn parse_admin_txn_id(text: &str) -> Option<(u64, u64)> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let (most, least) = inner.split_once(',')?;
    Some((most.trim().parse().ok()?, least.trim().parse().ok()?))
}

/// Unloads a topic (one partition, or a non-partitioned topic) from its broker
/// (`PUT .../unload`): the broker closes it and loads it again on the next use, with fresh state (its
/// transaction buffer recovers from its snapshot).
pub async fn unload_topic(admin_url: &str, config: &ClientConfig, topic: &TopicName) -> Result<()> {
    let Some(path) = persistent_path(topic) else {
        return Ok(());
    };
    send(
        reqwest::Method::PUT,
        admin_url,
        config,
        &format!("/admin/v2/persistent/{path}/unload"),
        None,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_ids_parse() {
        assert_eq!(parse_admin_txn_id("(0,3)"), Some((0, 3)));
        assert_eq!(parse_admin_txn_id(" (12, 99) "), Some((12, 99)));
        assert_eq!(parse_admin_txn_id("0:3"), None);
        assert_eq!(parse_admin_txn_id("(a,3)"), None);
    }

    #[test]
    fn open_transactions_carry_their_acknowledgements() {
        let slow = serde_json::json!({
            "(1,5)": {"txnId": "(1,5)", "status": "OPEN", "ackedPartitions": {},
                      "producedPartitions": {"persistent://public/default/in": {}}},
            "(0,3)": {"txnId": "(0,3)", "status": "OPEN",
                      "ackedPartitions": {"persistent://public/default/in": {"job-sub": {}, "x": {}}}},
            "junk": {"status": "OPEN"}
        });
        let open = open_transactions(&slow);
        assert_eq!(
            open.iter().map(|t| t.id).collect::<Vec<_>>(),
            [(0, 3), (1, 5)]
        );
        assert_eq!(
            open[0].acked["persistent://public/default/in"],
            BTreeSet::from(["job-sub".to_owned(), "x".to_owned()])
        );
        assert!(open[1].acked.is_empty());
        assert!(open_transactions(&serde_json::Value::Null).is_empty());
    }

    #[test]
    fn ledger_stats_read_the_first_ledger_and_cursors() {
        let stats = serde_json::json!({
            "ledgers": [{"ledgerId": 17, "entries": 3}, {"ledgerId": 18}],
            "cursors": {"job-sub": {"markDeletePosition": "17:2"}, "odd": {"markDeletePosition": "?"}}
        });
        let s = LedgerStats::from_json(&stats);
        assert_eq!(s.first_ledger, Some(17));
        assert_eq!(s.cursors, BTreeMap::from([("job-sub".to_owned(), (17, 2))]));
        assert_eq!(
            LedgerStats::from_json(&serde_json::json!({})),
            LedgerStats::default()
        );
    }

    #[test]
    fn consumers_are_read_from_the_topic_and_its_partitions() {
        let stats = serde_json::json!({
            "subscriptions": {"job-sub": {"consumers": [{"consumerName": "a"}]},
                              "other": {"consumers": [{"consumerName": "z"}]}},
            "partitions": {
                "persistent://public/default/in-partition-0":
                    {"subscriptions": {"job-sub": {"consumers": [{"consumerName": "b"}, {"consumerName": "a"}]}}},
                "persistent://public/default/in-partition-1": {"subscriptions": {}}
            }
        });
        assert_eq!(
            consumers_in_stats(&stats, "job-sub"),
            BTreeSet::from(["a".to_owned(), "b".to_owned()])
        );
        assert!(consumers_in_stats(&stats, "missing").is_empty());
    }

    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(path_segment("job:abc/1 x"), "job%3Aabc%2F1%20x");
        assert_eq!(path_segment("a-b_c.d~"), "a-b_c.d~");
    }

    #[test]
    fn non_persistent_topics_have_no_admin_path() {
        let t = TopicName::parse("non-persistent://public/default/x").unwrap();
        assert_eq!(persistent_path(&t), None);
        let t = TopicName::parse("x").unwrap();
        assert_eq!(persistent_path(&t), Some("public/default/x"));
    }
}
