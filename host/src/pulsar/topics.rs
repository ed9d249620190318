//! Topic names and the splits (topic-partitions) a source reads.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{Context, Result, bail};
use magnetar::PulsarClient;
use magnetar::admin::AdminClient;
use regex::Regex;

/// A fully qualified topic name, `persistent://tenant/namespace/name` (or `non-persistent://`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicName(String);

impl TopicName {
    /// Completes a short name the way Pulsar does: `name` → `persistent://public/default/name`,
    /// `tenant/ns/name` → `persistent://tenant/ns/name`.
    pub fn parse(input: &str) -> Result<TopicName> {
        let s = input.trim();
        if s.is_empty() {
            bail!("empty topic name");
        }
        let (domain, rest) = match s.split_once("://") {
            Some((d @ ("persistent" | "non-persistent"), rest)) => (d, rest),
            Some((d, _)) => bail!(
                "invalid topic '{s}': unknown domain '{d}' (expected persistent:// or non-persistent://)"
            ),
            None => ("persistent", s),
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let full = match parts.as_slice() {
            [name] => format!("{domain}://public/default/{name}"),
            [tenant, ns, name] => format!("{domain}://{tenant}/{ns}/{name}"),
            _ => bail!(
                "invalid topic '{s}': expected 'name', 'tenant/namespace/name' or 'persistent://tenant/namespace/name'"
            ),
        };
        if parts.iter().any(|p| p.trim().is_empty()) {
            bail!("invalid topic '{s}': empty tenant, namespace or name");
        }
        Ok(TopicName(full))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `tenant/namespace`.
    pub fn namespace(&self) -> &str {
        let rest = self.0.split_once("://").map_or(self.0.as_str(), |(_, r)| r);
        rest.rsplit_once('/').map_or(rest, |(ns, _)| ns)
    }

    /// The partition topic `<name>-partition-<i>`.
    pub fn partition(&self, i: u32) -> TopicName {
        TopicName(format!("{}-partition-{i}", self.0))
    }

    /// For `<name>-partition-<i>`: the parent topic and `i`.
    pub fn partition_of(&self) -> Option<(TopicName, u32)> {
        let (parent, idx) = self.0.rsplit_once("-partition-")?;
        Some((TopicName(parent.to_owned()), idx.parse().ok()?))
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Splits a `topic` option value: a list separated by `,` or `;` (both connector generations).
pub fn parse_topic_list(value: &str) -> Result<Vec<TopicName>> {
    let mut topics = Vec::new();
    for part in value
        .split([',', ';'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let t = TopicName::parse(part)?;
        if !topics.contains(&t) {
            topics.push(t);
        }
    }
    if topics.is_empty() {
        bail!("no topic in '{value}'");
    }
    Ok(topics)
}

/// One unit a source reads: a partition of a partitioned topic, or a non-partitioned topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Split {
    /// The topic the broker serves: `<topic>-partition-<i>` or the topic itself.
    pub topic: TopicName,
    /// The partition index, `-1` for a non-partitioned topic.
    pub partition: i32,
}

/// The splits of `topics` now: each partition of a partitioned topic, or the topic itself.
pub async fn splits_of(client: &PulsarClient, topics: &[TopicName]) -> Result<Vec<Split>> {
    let mut out = Vec::new();
    for t in topics {
        let n = client
            .partitions_for_topic(t.as_str())
            .await
            .with_context(|| format!("looking up the partitions of {t}"))?;
        if n == 0 {
            out.push(Split {
                topic: t.clone(),
                partition: -1,
            });
        } else {
            out.extend((0..n).map(|i| Split {
                topic: t.partition(i),
                partition: i as i32,
            }));
        }
    }
    Ok(out)
}

/// What a source reads: a list of topics, or every topic of one namespace matching a pattern.
#[derive(Debug, Clone)]
pub enum TopicSelection {
    Topics(Vec<TopicName>),
    Pattern(String),
}

impl TopicSelection {
    /// The splits selected now. Pattern listing uses the admin API when one is given (no broker-side state),
    /// else a topic-list snapshot over the binary protocol.
    pub async fn splits(
        &self,
        client: &PulsarClient,
        admin: Option<&AdminClient>,
    ) -> Result<Vec<Split>> {
        match self {
            TopicSelection::Topics(topics) => splits_of(client, topics).await,
            TopicSelection::Pattern(pattern) => {
                let topics = match admin {
                    Some(admin) => topics_matching_admin(admin, pattern).await?,
                    None => topics_matching(client, pattern).await?,
                };
                splits_of(client, &topics).await
            }
        }
    }
}

/// Tracks the splits a running source knows, to find the ones that appeared since (new partitions of a
/// partitioned topic, new topics matching a pattern). Splits that disappear are not reported.
#[derive(Debug)]
pub struct Discovery {
    selection: TopicSelection,
    known: BTreeSet<Split>,
    /// Rounds in a row that failed (listing, or opening a discovered split).
    failed_rounds: u32,
}

/// Discovery rounds in a row that may fail (each logged, the splits retried at the next round) before the
/// source fails: a partition the broker has just added can refuse consumers for a moment, a listing can
/// time out, but a topic that stays unreadable is an error.
pub const MAX_FAILED_DISCOVERY_ROUNDS: u32 = 10;

impl Discovery {
    pub fn new(selection: TopicSelection, known: impl IntoIterator<Item = Split>) -> Self {
        Discovery {
            selection,
            known: known.into_iter().collect(),
            failed_rounds: 0,
        }
    }

    /// A split found by a round that could not be opened: found again (and retried) by the next round.
    pub fn forget(&mut self, split: &Split) {
        self.known.remove(split);
    }

    /// The outcome of a round: `Err` once [`MAX_FAILED_DISCOVERY_ROUNDS`] rounds in a row failed.
    pub fn round_done(&mut self, failure: Option<anyhow::Error>) -> Result<()> {
        match failure {
            None => {
                self.failed_rounds = 0;
                Ok(())
            }
            Some(e) => {
                self.failed_rounds += 1;
                if self.failed_rounds >= MAX_FAILED_DISCOVERY_ROUNDS {
                    Err(e.context(format!(
                        "partition discovery failed {} rounds in a row",
                        self.failed_rounds
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Splits selected now that were not known; they become known.
    pub async fn new_splits(
        &mut self,
        client: &PulsarClient,
        admin: Option<&AdminClient>,
    ) -> Result<Vec<Split>> {
        let now = self.selection.splits(client, admin).await?;
        Ok(now
            .into_iter()
            .filter(|s| self.known.insert(s.clone()))
            .collect())
    }
}

/// A topic pattern completed the way short topic names are (StreamNative's connector does the same):
/// `orders-\d+` → `persistent://public/default/orders-\d+`, `tenant/ns/orders-.*` →
/// `persistent://tenant/ns/orders-.*`; checked to name a namespace and to be a regular expression.
pub fn complete_pattern(pattern: &str) -> Result<String> {
    let pattern = pattern.trim();
    let full = if pattern.contains("://") {
        pattern.to_owned()
    } else if pattern.contains('/') {
        format!("persistent://{pattern}")
    } else {
        format!("persistent://public/default/{pattern}")
    };
    pattern_parts(&full)?;
    Ok(full)
}

/// Splits a pattern into its namespace, an anchored regex over full topic names, and the full pattern.
fn pattern_parts(pattern: &str) -> Result<(String, Regex, String)> {
    let full = if pattern.contains("://") {
        pattern.to_owned()
    } else {
        format!("persistent://{pattern}")
    };
    let namespace = {
        let rest = full.split_once("://").map_or(full.as_str(), |(_, r)| r);
        let mut it = rest.splitn(3, '/');
        match (it.next(), it.next(), it.next()) {
            (Some(t), Some(ns), Some(re)) if !t.is_empty() && !ns.is_empty() && !re.is_empty() => {
                format!("{t}/{ns}")
            }
            _ => bail!(
                "invalid topic-pattern '{pattern}': expected 'persistent://tenant/namespace/<regex>', 'tenant/namespace/<regex>' or '<regex>' (in public/default)"
            ),
        }
    };
    let re = Regex::new(&format!("^(?:{full})$"))
        .with_context(|| format!("invalid topic-pattern '{pattern}': not a regular expression"))?;
    Ok((namespace, re, full))
}

/// Matching names, partitions folded into their parent topic, sorted.
fn fold_matching(names: impl IntoIterator<Item = String>, re: &Regex) -> Vec<TopicName> {
    let mut out: Vec<TopicName> = Vec::new();
    for name in names {
        let t = TopicName(name);
        let parent = t.partition_of().map_or(t, |(p, _)| p);
        if re.is_match(parent.as_str()) && !out.contains(&parent) {
            out.push(parent);
        }
    }
    out.sort();
    out
}

/// [`topics_matching`] through the admin API.
pub async fn topics_matching_admin(admin: &AdminClient, pattern: &str) -> Result<Vec<TopicName>> {
    let (namespace, re, _) = pattern_parts(pattern)?;
    let names = admin.topics_list(&namespace).await.with_context(|| {
        format!("listing the topics of namespace {namespace} through the admin API")
    })?;
    Ok(fold_matching(names, &re))
}

/// The topics of the pattern's namespace whose full name matches `pattern` (the whole name must match,
/// as in Java's `Pattern.matches`). Partitions are folded into their parent topic.
pub async fn topics_matching(client: &PulsarClient, pattern: &str) -> Result<Vec<TopicName>> {
    let (namespace, re, full) = pattern_parts(pattern)?;
    // The broker bounds the length of a watcher's pattern (50 by default): ask for the whole namespace
    // and match here.
    let domain = full.split_once("://").map_or("persistent", |(d, _)| d);
    let names = client
        .topic_list_snapshot(&namespace, &format!("{domain}://{namespace}/.*"))
        .await
        .with_context(|| format!("listing the topics of namespace {namespace}"))?;
    Ok(fold_matching(names, &re))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_fails_only_after_rounds_in_a_row_fail() {
        let mut d = Discovery::new(
            TopicSelection::Pattern("persistent://public/default/x-.*".into()),
            [],
        );
        for _ in 1..MAX_FAILED_DISCOVERY_ROUNDS {
            d.round_done(Some(anyhow::anyhow!("refused"))).unwrap();
        }
        // A good round resets the count.
        d.round_done(None).unwrap();
        for _ in 1..MAX_FAILED_DISCOVERY_ROUNDS {
            d.round_done(Some(anyhow::anyhow!("refused"))).unwrap();
        }
        let e = d.round_done(Some(anyhow::anyhow!("refused"))).unwrap_err();
        assert!(
            format!("{e:#}").contains("rounds in a row: refused"),
            "{e:#}"
        );
    }

    #[test]
    fn completes_short_patterns() {
        assert_eq!(
            complete_pattern("myTopic-\\d+").unwrap(),
            "persistent://public/default/myTopic-\\d+"
        );
        assert_eq!(
            complete_pattern("t1/ns/orders-.*").unwrap(),
            "persistent://t1/ns/orders-.*"
        );
        assert_eq!(
            complete_pattern("non-persistent://t1/ns/x.*").unwrap(),
            "non-persistent://t1/ns/x.*"
        );
        let e = complete_pattern("orders-(").unwrap_err();
        assert!(
            format!("{e:#}").contains("not a regular expression"),
            "{e:#}"
        );
        assert!(complete_pattern("persistent://t1/.*").is_err());
    }

    #[test]
    fn completes_short_names() {
        assert_eq!(
            TopicName::parse("orders").unwrap().as_str(),
            "persistent://public/default/orders"
        );
        assert_eq!(
            TopicName::parse("t/ns/x").unwrap().as_str(),
            "persistent://t/ns/x"
        );
        assert_eq!(
            TopicName::parse("non-persistent://t/ns/x")
                .unwrap()
                .as_str(),
            "non-persistent://t/ns/x"
        );
        assert!(
            TopicName::parse("kafka://t/ns/x")
                .unwrap_err()
                .to_string()
                .contains("unknown domain")
        );
        assert!(TopicName::parse("a/b").is_err());
        assert!(
            TopicName::parse("t//x")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert_eq!(TopicName::parse("t/ns/x").unwrap().namespace(), "t/ns");
    }

    #[test]
    fn lists_split_on_commas_and_semicolons() {
        let l = parse_topic_list("a, b;persistent://t/n/c;;a").unwrap();
        let names: Vec<_> = l.iter().map(TopicName::as_str).collect();
        assert_eq!(
            names,
            [
                "persistent://public/default/a",
                "persistent://public/default/b",
                "persistent://t/n/c"
            ]
        );
    }

    #[test]
    fn partitions_round_trip() {
        let t = TopicName::parse("x").unwrap();
        let p = t.partition(3);
        assert_eq!(p.as_str(), "persistent://public/default/x-partition-3");
        assert_eq!(p.partition_of(), Some((t, 3)));
    }
}
