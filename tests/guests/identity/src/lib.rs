//! Identity format: `encode-batch` writes each row as a self-describing binary value, `decode-batch`
//! reads it back, so rows → payloads → rows must come out exactly as they went in. Exercises every
//! type through the SDK's column builders and readers in both directions.

use pulsar_connect_plugin::prelude::*;

struct Identity;

struct IdentityDecoder {
    row_type: RowType,
}

struct IdentityEncoder {
    row_type: RowType,
}

impl codec::Guest for Identity {
    type Decoder = IdentityDecoder;
    type Encoder = IdentityEncoder;

    fn create_decoder(
        _options: Options,
        row_type: RowType,
        _metadata: Vec<String>,
    ) -> Result<codec::Decoder, ConfigError> {
        BatchBuilder::new(&row_type).map_err(|message| ConfigError {
            option: None,
            message,
        })?;
        pulsar_connect_plugin::log::log(
            pulsar_connect_plugin::log::Level::Info,
            "identity decoder created",
            &[("fields", &row_type.fields.len().to_string())],
        );
        Ok(codec::Decoder::new(IdentityDecoder { row_type }))
    }

    fn create_encoder(_options: Options, row_type: RowType) -> Result<codec::Encoder, ConfigError> {
        BatchBuilder::new(&row_type).map_err(|message| ConfigError {
            option: None,
            message,
        })?;
        Ok(codec::Encoder::new(IdentityEncoder { row_type }))
    }
}

impl codec::GuestDecoder for IdentityDecoder {
    fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
        decode_rows(&self.row_type, &messages, |m| {
            let mut input = m.payload;
            match get(&mut input)? {
                Value::Row(values) if input.is_empty() => Ok(values),
                Value::Row(_) => Err(format!("{} trailing bytes", input.len())),
                other => Err(format!("expected a ROW, found {}", other.kind())),
            }
        })
    }
}

impl codec::GuestEncoder for IdentityEncoder {
    fn encode_batch(
        &self,
        rows: ColumnBatch,
        kinds: Option<Vec<codec::RowKind>>,
    ) -> Result<EncodedBatch, String> {
        let kinds = kinds.unwrap_or_default();
        let deleted = |i: usize| matches!(kinds.get(i), Some(codec::RowKind::Delete));
        let mut row = 0;
        let mut encoded = encode_rows(&self.row_type, &rows, |values| {
            row += 1;
            // A delete is written as a tombstone: no payload at all (WIT 0.2.0's `absent`).
            if deleted(row - 1) {
                return Ok(Vec::new());
            }
            let mut out = Vec::new();
            put(&Value::Row(values.to_vec()), &mut out);
            Ok(out)
        })?;
        if (0..row).any(deleted) {
            let mut absent = vec![0u8; row.div_ceil(8)];
            for i in (0..row).filter(|&i| deleted(i)) {
                absent[i / 8] |= 1 << (i % 8);
            }
            encoded.absent = Some(absent);
        }
        Ok(encoded)
    }
}

fn put_len(n: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, u8::from(*b)]),
        Value::I8(x) => out.extend_from_slice(&[2, *x as u8]),
        Value::I16(x) => {
            out.push(3);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::I32(x) => {
            out.push(4);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::I64(x) => {
            out.push(5);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::F32(x) => {
            out.push(6);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::F64(x) => {
            out.push(7);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::Decimal(x) => {
            out.push(8);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::String(s) => {
            out.push(9);
            put_len(s.len(), out);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bytes(b) => {
            out.push(10);
            put_len(b.len(), out);
            out.extend_from_slice(b);
        }
        Value::Date(x) => {
            out.push(11);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Time(x) => {
            out.push(12);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Timestamp(x) => {
            out.push(13);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Array(items) | Value::Row(items) => {
            out.push(if matches!(v, Value::Array(_)) { 14 } else { 16 });
            put_len(items.len(), out);
            items.iter().for_each(|i| put(i, out));
        }
        Value::Map(entries) => {
            out.push(15);
            put_len(entries.len(), out);
            for (k, v) in entries {
                put(k, out);
                put(v, out);
            }
        }
    }
}

fn take<const N: usize>(input: &mut &[u8]) -> Result<[u8; N], String> {
    let (head, rest) = input.split_at_checked(N).ok_or("truncated payload")?;
    *input = rest;
    Ok(head.try_into().map_err(|_| "truncated payload")?)
}

fn take_vec(input: &mut &[u8]) -> Result<Vec<u8>, String> {
    let n = u32::from_le_bytes(take(input)?) as usize;
    let (head, rest) = input.split_at_checked(n).ok_or("truncated payload")?;
    *input = rest;
    Ok(head.to_vec())
}

fn get(input: &mut &[u8]) -> Result<Value, String> {
    let [tag] = take::<1>(input)?;
    Ok(match tag {
        0 => Value::Null,
        1 => Value::Bool(take::<1>(input)?[0] != 0),
        2 => Value::I8(take::<1>(input)?[0] as i8),
        3 => Value::I16(i16::from_le_bytes(take(input)?)),
        4 => Value::I32(i32::from_le_bytes(take(input)?)),
        5 => Value::I64(i64::from_le_bytes(take(input)?)),
        6 => Value::F32(f32::from_bits(u32::from_le_bytes(take(input)?))),
        7 => Value::F64(f64::from_bits(u64::from_le_bytes(take(input)?))),
        8 => Value::Decimal(i128::from_le_bytes(take(input)?)),
        9 => Value::String(String::from_utf8(take_vec(input)?).map_err(|e| e.to_string())?),
        10 => Value::Bytes(take_vec(input)?),
        11 => Value::Date(i32::from_le_bytes(take(input)?)),
        12 => Value::Time(i64::from_le_bytes(take(input)?)),
        13 => Value::Timestamp(i64::from_le_bytes(take(input)?)),
        14 | 16 => {
            let n = u32::from_le_bytes(take(input)?) as usize;
            let items = (0..n).map(|_| get(input)).collect::<Result<Vec<_>, _>>()?;
            if tag == 14 {
                Value::Array(items)
            } else {
                Value::Row(items)
            }
        }
        15 => {
            let n = u32::from_le_bytes(take(input)?) as usize;
            Value::Map(
                (0..n)
                    .map(|_| Ok((get(input)?, get(input)?)))
                    .collect::<Result<Vec<_>, String>>()?,
            )
        }
        other => return Err(format!("unknown value tag {other}")),
    })
}

pulsar_connect_plugin::export_format!(Identity);
