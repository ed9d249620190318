//! `scan.startup.mode` and its companions decoded into [`Startup`]: where a fresh source starts; and
//! `subscription-type`, which decides whether the checkpoint or the subscription's cursor is where a start
//! resumes.

use anyhow::{Result, anyhow, bail};

use super::{SourceConfig, option_error};
use crate::connectors::pulsar::options as opt;
use crate::options::ResolvedOptions;
use crate::pulsar::message_id::parse_message_id;
use crate::pulsar::reader::SubscriptionKind;
use crate::pulsar::topics::TopicName;

/// Where a fresh source starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Startup {
    Earliest,
    Latest,
    /// Inclusive positions per partition index, optionally for one topic only.
    SpecificOffsets(Vec<SpecificOffset>),
    ExternalSubscription {
        name: String,
        from_earliest: bool,
    },
    Timestamp(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpecificOffset {
    /// `None`: applies to this partition index of every topic.
    pub topic: Option<TopicName>,
    /// Where the partition starts.
    pub start: OffsetStart,
    /// The partition index (`-1`: a non-partitioned topic, or every partition for [`OffsetStart::Earliest`]
    /// and [`OffsetStart::Latest`], whose ids name no partition).
    pub partition: i32,
}

/// The start of one `specific-offsets` entry.
#[derive(Debug, Clone, PartialEq)]
pub enum OffsetStart {
    /// `-1:-1:-1`, the text of the Java client's `MessageId.earliest`.
    Earliest,
    /// `9223372036854775807:9223372036854775807:-1`, the text of `MessageId.latest`.
    Latest,
    /// `ledger:entry:partition[:batch]` (inclusive).
    At(String),
}

/// The source's start on a fresh start (`scan.startup.*`). The option layer has checked the value of
/// `scan.startup.mode` and that the option each mode needs is set.
pub(super) fn startup(table: &str, o: &ResolvedOptions) -> Result<Startup> {
    let required = |option: &str, mode: &str, hint: &str| {
        option_error(
            table,
            option,
            format!("required when '{}' = '{mode}'{hint}", opt::STARTUP_MODE),
        )
    };
    Ok(match o.text(opt::STARTUP_MODE).unwrap_or_default() {
        "earliest" => Startup::Earliest,
        "latest" => Startup::Latest,
        "timestamp" => Startup::Timestamp(
            o.int(opt::STARTUP_TIMESTAMP)
                .ok_or_else(|| {
                    required(opt::STARTUP_TIMESTAMP, "timestamp", " (ms since the epoch)")
                })?
                .max(0) as u64,
        ),
        "external-subscription" => Startup::ExternalSubscription {
            name: o
                .get(opt::STARTUP_SUB_NAME)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| required(opt::STARTUP_SUB_NAME, "external-subscription", ""))?
                .to_owned(),
            from_earliest: o.text(opt::STARTUP_SUB_START) == Some("earliest"),
        },
        "specific-offsets" => {
            let text = o.get(opt::STARTUP_SPECIFIC_OFFSETS).ok_or_else(|| {
                required(
                    opt::STARTUP_SPECIFIC_OFFSETS,
                    "specific-offsets",
                    " (e.g. '42:1012:0;44:1011:1')",
                )
            })?;
            Startup::SpecificOffsets(parse_specific_offsets(text)?)
        }
        other => {
            return Err(option_error(
                table,
                opt::STARTUP_MODE,
                format!(
                    "'{other}' is not allowed; allowed values: {}",
                    opt::STARTUP_MODES.join(", ")
                ),
            ));
        }
    })
}

fn sentinel(id: &str) -> Option<(OffsetStart, i32)> {
    let parts: Vec<&str> = id.split(':').map(str::trim).collect();
    if !(3..=4).contains(&parts.len()) {
        return None;
    }
    let partition: i32 = parts[2].parse().ok().filter(|p| *p >= -1)?;
    match (parts[0], parts[1]) {
        ("-1", "-1") => Some((OffsetStart::Earliest, partition)),
        ("9223372036854775807", "9223372036854775807") => Some((OffsetStart::Latest, partition)),
        _ => None,
    }
}

/// `ledger:entry:partition[:batch]` entries separated by `;` (a trailing `;` is fine), each optionally
/// `<topic>@` qualified.
pub fn parse_specific_offsets(text: &str) -> Result<Vec<SpecificOffset>> {
    let mut out: Vec<SpecificOffset> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (topic, id) = match entry.rsplit_once('@') {
            Some((t, id)) => (
                Some(TopicName::parse(t.trim()).map_err(|e| {
                    anyhow!("option 'scan.startup.specific-offsets': entry '{entry}': {e:#}")
                })?),
                id.trim(),
            ),
            None => (None, entry),
        };
        let (start, partition) = match sentinel(id) {
            Some((start, partition)) => (start, partition),
            None => {
                let parsed = parse_message_id(id).map_err(|e| {
                    anyhow!(
                        "option 'scan.startup.specific-offsets': entry '{entry}' should be 'ledger:entry:partition[:batch]' (e.g. '42:1012:0;44:1011:1', or '-1:-1:-1' for earliest): {e}"
                    )
                })?;
                (OffsetStart::At(id.to_owned()), parsed.partition)
            }
        };
        // A later entry for the same partition wins, as in the reference.
        out.retain(|o| !(o.topic == topic && o.partition == partition));
        out.push(SpecificOffset {
            topic,
            start,
            partition,
        });
    }
    if out.is_empty() {
        bail!("option 'scan.startup.specific-offsets': no entry (e.g. '42:1012:0;44:1011:1')");
    }
    Ok(out)
}

/// `subscription-type`, checked against the source's other options.
pub(super) fn subscription_kind(
    table: &str,
    o: &ResolvedOptions,
    source: &SourceConfig,
) -> Result<SubscriptionKind> {
    let written = o.text(opt::SUBSCRIPTION_TYPE).unwrap_or("Exclusive");
    let kind = match written {
        "Exclusive" => return Ok(SubscriptionKind::Exclusive),
        "Failover" => SubscriptionKind::Failover,
        "Shared" => SubscriptionKind::Shared,
        _ => SubscriptionKind::KeyShared,
    };
    let shared = "several processes share the subscription";
    match &source.startup {
        Startup::Earliest | Startup::Latest | Startup::ExternalSubscription { .. } => {}
        other => {
            let mode = match other {
                Startup::Timestamp(_) => "timestamp",
                _ => "specific-offsets",
            };
            return Err(option_error(
                table,
                opt::STARTUP_MODE,
                format!(
                    "'{mode}' needs '{}' = 'Exclusive': with '{written}' {shared} and moving it to a start position would move every process's position; use 'earliest' or 'latest' (where a new subscription starts; an existing one resumes at its cursor)",
                    opt::SUBSCRIPTION_TYPE
                ),
            ));
        }
    }
    if source.key_ranges.is_some() {
        return Err(option_error(
            table,
            opt::KEY_HASH_RANGE,
            format!(
                "key-hash ranges read through non-durable subscriptions of their own and cannot be combined with '{}' = '{written}'",
                opt::SUBSCRIPTION_TYPE
            ),
        ));
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specific_offsets_syntax() {
        let v = parse_specific_offsets("42:1012:0;44:1011:1;").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].partition, 1);
        let v = parse_specific_offsets("persistent://public/default/t@1:2:-1:3").unwrap();
        assert_eq!(v[0].partition, -1);
        assert!(v[0].topic.is_some());
        let e = parse_specific_offsets("42,1012,0").unwrap_err().to_string();
        assert!(e.contains("scan.startup.specific-offsets"), "{e}");
        let v = parse_specific_offsets("1:2:0;3:4:0").unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].start, OffsetStart::At("3:4:0".into()));
        // The Java client's MessageId.earliest / MessageId.latest texts.
        let v = parse_specific_offsets("-1:-1:-1").unwrap();
        assert_eq!(
            (v[0].start.clone(), v[0].partition),
            (OffsetStart::Earliest, -1)
        );
        let v =
            parse_specific_offsets("9223372036854775807:9223372036854775807:-1;-1:-1:2").unwrap();
        assert_eq!(v[0].start, OffsetStart::Latest);
        assert_eq!(
            (v[1].start.clone(), v[1].partition),
            (OffsetStart::Earliest, 2)
        );
        assert!(parse_specific_offsets("-1:5:0").is_err());
    }
}
