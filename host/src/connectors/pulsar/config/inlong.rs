//! `inlong.metric.labels`: InLong's `groupId=..&streamId=..&nodeId=..`, pairs joined by `&`, each
//! `key=value` (as InLong's `MetricOption` reads it). The pairs label the table's metric series.

use anyhow::Result;

use super::option_error;
use crate::connector_api::MetricLabels;

pub const OPTION: &str = "inlong.metric.labels";

/// Labels of our own a table's labels may not replace.
const RESERVED: &[&str] = &["job", "table", "topic", "partition", "plugin", "le"];

/// The table's labels (none when the option is unset); `inlong`: the connector is a `pulsar-inlong` one.
pub fn metric_labels(table: &str, value: Option<&str>, inlong: bool) -> Result<MetricLabels> {
    let Some(value) = value else {
        return Ok(MetricLabels {
            labels: Vec::new(),
            inlong,
        });
    };
    let err = |why: String| {
        option_error(
            table,
            OPTION,
            format!(
                "'{value}': {why}; expected key=value pairs joined by '&', e.g. 'groupId=g1&streamId=s1&nodeId=n1'"
            ),
        )
    };
    let mut labels: Vec<(String, String)> = Vec::new();
    for pair in value.trim().split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(err(format!("'{pair}' is not key=value")));
        };
        let k = k.trim();
        let valid = k
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if k.is_empty() || !valid || k.starts_with("__") {
            return Err(err(format!(
                "'{k}' is not a label name (letters, digits and '_', not starting with a digit or '__')"
            )));
        }
        if RESERVED.contains(&k) {
            return Err(err(format!(
                "'{k}' is a label pulsar-connect sets itself ({})",
                RESERVED.join(", ")
            )));
        }
        if labels.iter().any(|(have, _)| have == k) {
            return Err(err(format!("'{k}' is given twice")));
        }
        labels.push((k.to_owned(), v.trim().to_owned()));
    }
    Ok(MetricLabels { labels, inlong })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlong_labels_are_pairs_joined_by_ampersands() {
        let l = metric_labels("t", Some("groupId=g1&streamId=s1&nodeId=n1"), true).unwrap();
        assert_eq!(
            l.labels,
            vec![
                ("groupId".into(), "g1".into()),
                ("streamId".into(), "s1".into()),
                ("nodeId".into(), "n1".into())
            ]
        );
        assert!(l.inlong);
        assert!(metric_labels("t", None, false).unwrap().is_empty());
    }

    #[test]
    fn malformed_labels_name_the_option() {
        for bad in [
            "groupId",
            "groupId=g&",
            "=g",
            "1a=b",
            "job=x",
            "a=1&a=2",
            "a-b=c",
        ] {
            let e = metric_labels("orders", Some(bad), true)
                .unwrap_err()
                .to_string();
            // The catalog adds the table (`table 'orders': option ...`; tests/e2e/status_page.rs).
            assert!(e.contains(&format!("option '{OPTION}'")), "{bad}: {e}");
        }
    }
}
