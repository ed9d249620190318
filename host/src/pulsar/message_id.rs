//! Message ids as users write them (`ledger:entry:partition[:batch]`) and as Pulsar serialises them
//! (`MessageIdData` protobuf bytes, the `messageId` metadata column).

use magnetar::MessageId;

/// A message id string that does not parse, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid message id '{input}': {reason} (expected ledgerId:entryId:partitionIndex, e.g. 12:34:-1)"
)]
pub struct MessageIdParseError {
    pub input: String,
    pub reason: String,
}

/// Parses `ledger:entry:partition` or `ledger:entry:partition:batchIndex` (the form Flink's Pulsar
/// connector and `MessageId.toString()` use). A partition of `-1` means a non-partitioned topic.
pub fn parse_message_id(input: &str) -> Result<MessageId, MessageIdParseError> {
    let err = |reason: &str| MessageIdParseError {
        input: input.to_owned(),
        reason: reason.to_owned(),
    };
    let parts: Vec<&str> = input.trim().split(':').collect();
    if !(3..=4).contains(&parts.len()) {
        return Err(err("expected three or four ':'-separated numbers"));
    }
    let ledger_id: u64 = parts[0]
        .trim()
        .parse()
        .map_err(|_| err("the ledger id is not a non-negative integer"))?;
    let entry_id: u64 = parts[1]
        .trim()
        .parse()
        .map_err(|_| err("the entry id is not a non-negative integer"))?;
    let partition: i32 = parts[2]
        .trim()
        .parse()
        .map_err(|_| err("the partition is not an integer"))?;
    if partition < -1 {
        return Err(err(
            "the partition must be -1 (non-partitioned) or a partition index",
        ));
    }
    let batch_index: i32 = match parts.get(3) {
        Some(b) => b
            .trim()
            .parse()
            .map_err(|_| err("the batch index is not an integer"))?,
        None => -1,
    };
    if batch_index < -1 {
        return Err(err("the batch index must be -1 or an index"));
    }
    let mut id = MessageId::EARLIEST;
    id.ledger_id = ledger_id;
    id.entry_id = entry_id;
    id.partition = partition;
    id.batch_index = batch_index;
    id.batch_size = -1;
    Ok(id)
}

/// `ledger:entry:partition[:batch]`, the inverse of [`parse_message_id`].
pub fn format_message_id(id: &MessageId) -> String {
    if id.batch_index >= 0 {
        format!(
            "{}:{}:{}:{}",
            id.ledger_id, id.entry_id, id.partition, id.batch_index
        )
    } else {
        format!("{}:{}:{}", id.ledger_id, id.entry_id, id.partition)
    }
}

/// The id serialised as Java's `MessageId.toByteArray()` does (protobuf `MessageIdData`): ledger and entry
/// always, the partition only when it is one (≥ 0), the batch index when set, the batch size when positive.
/// magnetar's own `to_bytes` also writes partition -1, which no other client does.
pub fn message_id_bytes(id: &MessageId) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::with_capacity(24);
    out.push(0x08);
    varint(id.ledger_id, &mut out);
    out.push(0x10);
    varint(id.entry_id, &mut out);
    if id.partition >= 0 {
        out.push(0x18);
        varint(id.partition as u64, &mut out);
    }
    if id.batch_index != -1 {
        out.push(0x20);
        // int32 on the wire: negative values as 10-byte two's complement.
        varint(i64::from(id.batch_index) as u64, &mut out);
    }
    if id.batch_size > 0 {
        out.push(0x30);
        varint(id.batch_size as u64, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_javas_to_byte_array() {
        // What the official client serialises for (144:0, non-partitioned, batch index 0 of 20).
        let mut id = parse_message_id("144:0:-1:0").unwrap();
        id.batch_size = 20;
        assert_eq!(message_id_bytes(&id), vec![8, 144, 1, 16, 0, 32, 0, 48, 20]);
        let back = MessageId::from_bytes(&message_id_bytes(&id)).unwrap();
        assert_eq!(
            (back.ledger_id, back.entry_id, back.batch_index),
            (144, 0, 0)
        );
        let id = parse_message_id("5:6:3").unwrap();
        assert_eq!(message_id_bytes(&id), vec![8, 5, 16, 6, 24, 3]);
    }

    #[test]
    fn parses_and_formats() {
        let id = parse_message_id("12:34:-1").unwrap();
        assert_eq!(
            (id.ledger_id, id.entry_id, id.partition, id.batch_index),
            (12, 34, -1, -1)
        );
        assert_eq!(format_message_id(&id), "12:34:-1");
        let id = parse_message_id(" 7:8:2:5 ").unwrap();
        assert_eq!((id.partition, id.batch_index), (2, 5));
        assert_eq!(format_message_id(&id), "7:8:2:5");
    }

    #[test]
    fn rejects_malformed_ids_with_the_reason() {
        for (input, reason) in [
            ("12:34", "three or four"),
            ("a:34:1", "ledger id"),
            ("1:-4:1", "entry id"),
            ("1:4:x", "partition"),
            ("1:4:-2", "partition must be"),
            ("1:4:1:1:1", "three or four"),
        ] {
            let e = parse_message_id(input).unwrap_err();
            assert!(e.to_string().contains(reason), "{input}: {e}");
            assert!(e.to_string().contains(input));
        }
    }

    #[test]
    fn bytes_round_trip_through_pulsars_serialisation() {
        let id = parse_message_id("5:6:3:2").unwrap();
        let bytes = id.to_bytes();
        let back = MessageId::from_bytes(&bytes).unwrap();
        assert_eq!(
            (
                back.ledger_id,
                back.entry_id,
                back.partition,
                back.batch_index
            ),
            (5, 6, 3, 2)
        );
    }
}
