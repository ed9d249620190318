//! `source.stop.*` decoded into a [`StopCursor`]: where a bounded table's reading ends, with the Apache
//! connector's names, values and validation rules (`PulsarTableOptionUtils.getStopCursor`,
//! `PulsarTableValidationUtils.validateStopCursorConfigs`). At most one of the three is set (the option
//! layer's rules); each error names the table and the option.

use anyhow::Result;

use super::{SourceConfig, option_error};
use crate::connectors::pulsar::options as opt;
use crate::options::ResolvedOptions;
use crate::pulsar::message_id::parse_message_id;
use crate::pulsar::reader::StopCursor;
use magnetar::MessageId;

/// The table's stop cursor (`never` when none of the options is set).
pub(super) fn stop_cursor(table: &str, o: &ResolvedOptions) -> Result<StopCursor> {
    if let Some(text) = o.get(opt::STOP_AT_MESSAGE_ID) {
        return Ok(match text.trim() {
            "never" => StopCursor::Never,
            "latest" => StopCursor::Latest,
            id => StopCursor::AtMessage(stop_id(table, opt::STOP_AT_MESSAGE_ID, id, true)?),
        });
    }
    if let Some(text) = o.get(opt::STOP_AFTER_MESSAGE_ID) {
        return Ok(StopCursor::AfterMessage(stop_id(
            table,
            opt::STOP_AFTER_MESSAGE_ID,
            text.trim(),
            false,
        )?));
    }
    if let Some(millis) = o.int(opt::STOP_AT_PUBLISH_TIME) {
        return Ok(StopCursor::AtPublishTime(millis.max(0) as u64));
    }
    Ok(StopCursor::Never)
}

/// `ledger:entry:partition`, three numbers, as the Apache connector parses a stop id (not `earliest`, not
/// `-1:-1:-1`; `at-message-id` also takes `never` and `latest`).
fn stop_id(table: &str, option: &str, text: &str, words: bool) -> Result<MessageId> {
    let allowed = if words {
        "'never', 'latest' or a message id 'ledgerId:entryId:partitionIndex' (e.g. '42:1012:0')"
    } else {
        "a message id 'ledgerId:entryId:partitionIndex' (e.g. '42:1012:0')"
    };
    let refuse =
        |why: &str| option_error(table, option, format!("'{text}' {why}; allowed: {allowed}"));
    if text == "earliest" || text == "-1:-1:-1" {
        return Err(refuse(
            "is the earliest message: a read that stops there reads nothing",
        ));
    }
    if text.split(':').count() != 3 {
        return Err(refuse("is not three ':'-separated numbers"));
    }
    let id = parse_message_id(text).map_err(|e| refuse(&e.reason))?;
    if (id.ledger_id, id.entry_id) == (i64::MAX as u64, i64::MAX as u64) {
        return Err(refuse("is the latest message id: use 'latest'"));
    }
    Ok(id)
}

/// A bounded table's other options: the splits are those that exist when it starts.
pub(super) fn check_bounded(table: &str, o: &ResolvedOptions, source: &SourceConfig) -> Result<()> {
    if !source.stop.is_bounded() {
        return Ok(());
    }
    let option = [
        opt::STOP_AT_MESSAGE_ID,
        opt::STOP_AFTER_MESSAGE_ID,
        opt::STOP_AT_PUBLISH_TIME,
    ]
    .into_iter()
    .find(|k| o.get(k).is_some())
    .unwrap_or(opt::STOP_AT_MESSAGE_ID);
    if source.discovery.is_some() {
        return Err(option_error(
            table,
            option,
            format!(
                "a bounded read reads the partitions and topics that exist when it starts, and ends: it cannot be combined with '{}' (set -1 or leave it unset)",
                opt::DISCOVERY
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_ids_parse_as_the_apache_connector_parses_them() {
        let id = stop_id("t", "o", "42:1012:0", false).unwrap();
        assert_eq!((id.ledger_id, id.entry_id, id.partition), (42, 1012, 0));
        assert_eq!(id.batch_index, -1);
        for bad in [
            "earliest",
            "-1:-1:-1",
            "42:1012",
            "42:1012:0:1",
            "a:b:c",
            "9223372036854775807:9223372036854775807:-1",
        ] {
            let e = stop_id("orders", "source.stop.after-message-id", bad, false)
                .unwrap_err()
                .to_string();
            // The catalog puts the table's name before it.
            assert!(e.contains("'source.stop.after-message-id'"), "{bad}: {e}");
        }
    }
}
