//! Flink's `avro` format (flink-avro 1.18): plain Avro binary (no header, no schema id) of the writer
//! schema Flink's `AvroSchemaConverter` derives from the row type. Hand-written encoder and decoder
//! of that one schema: no generic Avro library, values go straight between bytes and columns.
//!
//! Native use: `avro_format::decoder(&[], &row_type)?.decode(&messages)?`,
//! `avro_format::encoder(&[], &row_type)?.encode(&columns)?`, and [`schema_json`] for the schema.

use format_common::read::Reader;
use format_common::temporal::split;
use format_common::{
    ColumnBatch, ConfigError, DataType, DecodedBatch, EncodedBatch, MessageBatch, Payloads,
    RowError, RowType, check_known, config_error, decimal, slice_at, type_string, units_per_second,
};
use pulsar_connect_plugin::columns::Cols;

mod fast;

/// The options this format takes (none beyond Flink's defaults).
pub const OPTIONS: &[&str] = &[];

/// Flink's record name for the top-level row.
pub use avro_schema::RECORD_NAME;

fn check_types(rt: &RowType) -> Result<(), ConfigError> {
    format_common::validate_row_type(rt)?;
    for (i, node) in rt.types.iter().enumerate() {
        let bare = || {
            let s = type_string(rt, i);
            s.strip_suffix(" NOT NULL").map(str::to_owned).unwrap_or(s)
        };
        match &node.data_type {
            DataType::Timestamp(p) if *p > 3 => {
                return Err(config_error(
                    None,
                    format!(
                        "Avro does not support TIMESTAMP type with precision: {p}, it only supports precision less than 3."
                    ),
                ));
            }
            DataType::Time(p) if *p > 3 => {
                return Err(config_error(
                    None,
                    format!(
                        "Avro does not support TIME type with precision: {p}, it only supports precision less than 3."
                    ),
                ));
            }
            DataType::TimestampLtz(_) => {
                return Err(config_error(
                    None,
                    format!("Unsupported to derive Schema for type: {}", bare()),
                ));
            }
            DataType::Map(m)
                if !matches!(
                    rt.types[m.key as usize].data_type,
                    DataType::Char(_) | DataType::Varchar(_)
                ) =>
            {
                return Err(config_error(
                    None,
                    format!(
                        "Avro format doesn't support non-string as key type of map. The key type is: {}",
                        type_string(rt, m.key as usize)
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The Avro schema (JSON) Flink derives for `row_type`, as in `AvroSchemaConverter.convertToSchema`
/// (the derivation the host registers topic schemas with).
pub fn schema_json(rt: &RowType) -> String {
    avro_schema::schema_json(&View(rt))
}

avro_schema::row_type_view!(View for RowType, DataType);

/// A configured decoder.
#[derive(Debug)]
pub struct Decoder {
    rt: RowType,
    /// The top-level fields as the fast path reads them ([`fast`]).
    plan: Vec<fast::Step>,
}

/// A configured encoder.
#[derive(Debug)]
pub struct Encoder {
    rt: RowType,
}

/// Creates a decoder (no options).
pub fn decoder(options: &[(String, String)], row_type: &RowType) -> Result<Decoder, ConfigError> {
    check_known(options, OPTIONS)?;
    check_types(row_type)?;
    Ok(Decoder {
        rt: row_type.clone(),
        plan: fast::plan(row_type),
    })
}

/// Creates an encoder (no options).
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    check_known(options, OPTIONS)?;
    check_types(row_type)?;
    Ok(Encoder {
        rt: row_type.clone(),
    })
}

struct In<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> In<'a> {
    #[inline]
    fn long(&mut self) -> Result<i64, String> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&byte) = self.b.get(self.i) else {
                return Err(format!("truncated: varint at byte {}", self.i));
            };
            self.i += 1;
            if shift >= 64 {
                return Err("invalid long encoding".into());
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    #[inline]
    fn int(&mut self) -> Result<i32, String> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("invalid int encoding ({v})"))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .i
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("truncated: {n} bytes wanted at byte {}", self.i))?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.long()?;
        if n < 0 {
            return Err(format!("Malformed data. Length is negative: {n}"));
        }
        self.take(n as usize)
    }
}

impl Decoder {
    /// Decodes a batch: one row per message (an empty payload is an error, as in Flink).
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        for index in 0..batch.count as usize {
            let payload = slice_at(&batch.payloads, &batch.payload_offsets, index);
            if self.fast_row(payload, &mut cols) {
                cols.end_row();
                continue;
            }
            // Not a row the fast path takes whole: again, value by value, naming what is wrong.
            cols.rollback();
            let mut input = In { b: payload, i: 0 };
            let mut r = Ok(());
            for (c, f) in self.rt.fields.iter().enumerate() {
                r = self
                    .value(&mut input, c, f.type_index as usize, &mut cols, 0)
                    .map_err(|e| {
                        format!("Failed to deserialize Avro record: field `{}`: {e}", f.name)
                    });
                if r.is_err() {
                    break;
                }
            }
            if r.is_ok() && input.i != payload.len() {
                r = Err(format!(
                    "Failed to deserialize Avro record: {} trailing bytes",
                    payload.len() - input.i
                ));
            }
            match r {
                Ok(()) => cols.end_row(),
                Err(reason) => {
                    cols.rollback();
                    errors.push(RowError {
                        index: index as u32,
                        reason,
                    });
                }
            }
        }
        Ok(format_common::decoded(cols, errors))
    }

    fn value(
        &self,
        input: &mut In<'_>,
        c: usize,
        ty: usize,
        cols: &mut Cols,
        depth: usize,
    ) -> Result<(), String> {
        if depth > 64 {
            return Err("nesting too deep".into());
        }
        let node = &self.rt.types[ty];
        if node.nullable {
            match input.long()? {
                0 => {
                    cols.push_null(c);
                    return Ok(());
                }
                1 => {}
                i => return Err(format!("Unknown union branch index: {i}")),
            }
        }
        match &node.data_type {
            DataType::Boolean => {
                let b = input.take(1)?[0];
                cols.push_bool(c, b != 0);
            }
            DataType::Tinyint => {
                let v = input.int()?;
                cols.push_i8(c, v as i8);
            }
            DataType::Smallint => {
                let v = input.int()?;
                cols.push_i16(c, v as i16);
            }
            DataType::Int | DataType::Date => {
                let v = input.int()?;
                cols.push_i32(c, v);
            }
            DataType::Bigint => {
                let v = input.long()?;
                cols.push_i64(c, v);
            }
            DataType::Float => {
                let b = input.take(4)?;
                cols.push_f32(c, f32::from_le_bytes(b.try_into().unwrap_or([0; 4])));
            }
            DataType::Double => {
                let b = input.take(8)?;
                cols.push_f64(c, f64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            }
            DataType::Decimal(d) => {
                let b = input.bytes()?;
                match decimal::from_be_bytes(b).filter(|v| decimal::fits(*v, d.precision)) {
                    Some(v) => cols.push_decimal(c, v),
                    None if node.nullable => cols.push_null(c),
                    None => return Err("decimal does not fit its precision".into()),
                }
            }
            DataType::Char(_) | DataType::Varchar(_) => {
                let b = input.bytes()?;
                format_common::utf8_lossy_java(b, cols.bytes_buf(c));
                cols.finish_bytes(c);
            }
            DataType::Binary(_) | DataType::Varbinary(_) => {
                let b = input.bytes()?;
                cols.push_bytes(c, b);
            }
            DataType::Time(p) => {
                let ms = i64::from(input.int()?);
                let v = ms * units_per_second(*p) / 1000;
                cols.push_i32(c, v as i32);
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                let ms = input.long()?;
                let v = match units_per_second(*p) {
                    1 => ms.div_euclid(1000),
                    u => ms.checked_mul(u / 1000).ok_or("timestamp out of range")?,
                };
                cols.push_i64(c, v);
            }
            DataType::Array(e) => {
                let child = cols.list_child(c);
                loop {
                    let mut n = input.long()?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        input.long()?; // block size in bytes
                        n = -n;
                    }
                    if n as u64 > (input.b.len() - input.i) as u64 + 1 {
                        return Err(format!("array block of {n} items exceeds the payload"));
                    }
                    for _ in 0..n {
                        self.value(input, child, *e as usize, cols, depth + 1)?;
                    }
                }
                cols.end_list(c);
            }
            DataType::Map(m) => {
                let (kc, vc) = cols.map_children(c);
                loop {
                    let mut n = input.long()?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        input.long()?;
                        n = -n;
                    }
                    if n as u64 > (input.b.len() - input.i) as u64 {
                        return Err(format!("map block of {n} entries exceeds the payload"));
                    }
                    for _ in 0..n {
                        let k = input.bytes()?;
                        format_common::utf8_lossy_java(k, cols.bytes_buf(kc));
                        cols.finish_bytes(kc);
                        self.value(input, vc, m.value as usize, cols, depth + 1)?;
                    }
                }
                cols.end_list(c);
            }
            DataType::Row(fields) => {
                let children = cols.row_children(c).to_vec();
                for (f, ch) in fields.iter().zip(children) {
                    self.value(input, ch, f.type_index as usize, cols, depth + 1)?;
                }
                cols.push_row_valid(c);
            }
        }
        Ok(())
    }
}

#[inline]
fn put_long(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(b: &[u8], out: &mut Vec<u8>) {
    put_long(b.len() as i64, out);
    out.extend_from_slice(b);
}

impl Encoder {
    /// Encodes a batch: one payload per row, values read straight from the columns.
    pub fn encode(&self, batch: &ColumnBatch) -> Result<EncodedBatch, String> {
        let r = Reader::new(&self.rt, batch)?;
        let rows = batch.row_count as usize;
        let mut out = Payloads::with_capacity(rows);
        for i in 0..rows {
            let mut failed = None;
            for (c, f) in self.rt.fields.iter().enumerate() {
                if let Err(e) = self.value(&r, c, f.type_index as usize, i, &mut out.payloads) {
                    failed = Some(format!("Failed to serialize row: field `{}`: {e}", f.name));
                    break;
                }
            }
            match failed {
                None => out.end(),
                Some(e) => out.fail(i, e),
            }
        }
        Ok(out.finish())
    }

    fn value(
        &self,
        r: &Reader<'_>,
        c: usize,
        ty: usize,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let node = &self.rt.types[ty];
        let null = r.is_null(c, i);
        if node.nullable {
            if null {
                out.push(0);
                return Ok(());
            }
            out.push(2);
        } else if null {
            return Err("NULL in a NOT NULL field".into());
        }
        match &node.data_type {
            DataType::Boolean => out.push(u8::from(r.bool(c, i))),
            DataType::Tinyint
            | DataType::Smallint
            | DataType::Int
            | DataType::Bigint
            | DataType::Date => put_long(r.int(c, i), out),
            DataType::Float => out.extend_from_slice(&r.f32(c, i).to_le_bytes()),
            DataType::Double => out.extend_from_slice(&r.f64(c, i).to_le_bytes()),
            DataType::Decimal(_) => put_bytes(&decimal::to_be_bytes_min(r.decimal(c, i)), out),
            DataType::Char(_)
            | DataType::Varchar(_)
            | DataType::Binary(_)
            | DataType::Varbinary(_) => put_bytes(r.bytes(c, i), out),
            DataType::Time(p) | DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                let (secs, nanos) = split(r.int(c, i), *p);
                put_long(secs * 1000 + i64::from(nanos / 1_000_000), out);
            }
            DataType::Array(e) => {
                let (s, end) = r.range(c, i);
                if end > s {
                    put_long((end - s) as i64, out);
                    let child = r.list_child(c);
                    for j in s..end {
                        self.value(r, child, *e as usize, j, out)?;
                    }
                }
                out.push(0);
            }
            DataType::Map(m) => {
                // Flink copies the map into a java.util.HashMap: its iteration order, the last value of
                // a repeated key.
                let (s, end) = r.range(c, i);
                let (kc, vc) = r.map_children(c);
                let mut keys: Vec<&str> = Vec::with_capacity(end - s);
                for j in s..end {
                    if r.is_null(kc, j) {
                        return Err("Avro map keys must be non-null strings".into());
                    }
                    keys.push(r.str(kc, j));
                }
                let order = format_common::java_hashmap_order(&keys);
                if !order.is_empty() {
                    put_long(order.len() as i64, out);
                    for k in order {
                        let last = keys.iter().rposition(|x| *x == keys[k]).unwrap_or(k);
                        put_bytes(keys[k].as_bytes(), out);
                        self.value(r, vc, m.value as usize, s + last, out)?;
                    }
                }
                out.push(0);
            }
            DataType::Row(fields) => {
                for (f, ch) in fields.iter().zip(r.row_children(c)) {
                    self.value(r, *ch as usize, f.type_index as usize, i, out)
                        .map_err(|e| format!("`{}`: {e}", f.name))?;
                }
            }
        }
        Ok(())
    }
}

format_common::export_component!(insert_only "avro");
