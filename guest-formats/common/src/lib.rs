//! Shared code of the built-in formats (json, avro, raw, csv): Flink's (Java's) text forms of numbers ([`javanum`]), decimals ([`decimal`]) and dates/times
//! ([`temporal`]), base64 ([`b64`]), small helpers around the WIT types and every format crate's wasm
//! component ([`export_component!`]).

pub mod b64;
mod component;
pub mod decimal;
pub mod escape;
#[cfg(feature = "golden")]
pub mod golden;
pub mod javanum;
pub mod read;
pub mod temporal;

/// The SDK, for [`export_component!`]'s expansion in the format crates.
#[doc(hidden)]
pub use pulsar_connect_plugin as __sdk;

/// The SDK's typed column builder, the one every format writes its rows with.
pub use pulsar_connect_plugin::columns::Cols;
pub use pulsar_connect_plugin::format::exports::pulsar_connect::plugin::codec::{
    DecodedBatch, EncodedBatch, RowKind,
};
pub use pulsar_connect_plugin::format::pulsar_connect::plugin::types::{
    ByteColumn, Column, ColumnBatch, ColumnData, ConfigError, DataType, DecimalType, Field,
    KeyBatch, ListColumn, MapColumn, MapType, MessageBatch, RowError, RowType, TypeNode,
};
pub use pulsar_connect_plugin::messages::{bit, slice_at};
pub use pulsar_connect_plugin::values::Value;

/// The SDK's skip marker of a row error's reason (see [`pulsar_connect_plugin::SKIPPED`]).
pub use pulsar_connect_plugin::{SKIPPED, skipped};

/// A configuration error.
pub fn config_error(option: Option<&str>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        option: option.map(str::to_owned),
        message: message.into(),
    }
}

/// The value of option `name`.
pub fn option<'a>(options: &'a [(String, String)], name: &str) -> Option<&'a str> {
    options
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim())
}

/// A boolean option (`true`/`false`, case-insensitive as Flink), `default` when absent.
pub fn bool_option(
    options: &[(String, String)],
    name: &str,
    default: bool,
) -> Result<bool, ConfigError> {
    match option(options, name) {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(config_error(
            Some(name),
            format!(
                "Unrecognized option for boolean: {v}. Expected either true or false(case insensitive)"
            ),
        )),
    }
}

/// Rejects options this format does not know.
pub fn check_known(options: &[(String, String)], known: &[&str]) -> Result<(), ConfigError> {
    for (name, _) in options {
        if !known.contains(&name.as_str()) {
            return Err(config_error(
                Some(name),
                format!(
                    "Unsupported options found: {name}. Supported options: {}",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Checks the structure of a row type: indexes in range, children after their parents.
pub fn validate_row_type(row_type: &RowType) -> Result<(), ConfigError> {
    pulsar_connect_plugin::columns::validate_row_type(row_type).map_err(|m| config_error(None, m))
}

/// Flink's SQL spelling of type `ty` of `row_type` (`ROW<`a` INT>` style for rows).
pub fn type_string(row_type: &RowType, ty: usize) -> String {
    let node = &row_type.types[ty];
    let base = match &node.data_type {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Tinyint => "TINYINT".into(),
        DataType::Smallint => "SMALLINT".into(),
        DataType::Int => "INT".into(),
        DataType::Bigint => "BIGINT".into(),
        DataType::Float => "FLOAT".into(),
        DataType::Double => "DOUBLE".into(),
        DataType::Decimal(d) => format!("DECIMAL({}, {})", d.precision, d.scale),
        DataType::Char(n) => format!("CHAR({n})"),
        DataType::Varchar(n) if *n == i32::MAX as u32 => "STRING".into(),
        DataType::Varchar(n) => format!("VARCHAR({n})"),
        DataType::Binary(n) => format!("BINARY({n})"),
        DataType::Varbinary(n) if *n == i32::MAX as u32 => "BYTES".into(),
        DataType::Varbinary(n) => format!("VARBINARY({n})"),
        DataType::Date => "DATE".into(),
        DataType::Time(p) => format!("TIME({p})"),
        DataType::Timestamp(p) => format!("TIMESTAMP({p})"),
        DataType::TimestampLtz(p) => format!("TIMESTAMP_LTZ({p})"),
        DataType::Array(e) => format!("ARRAY<{}>", type_string(row_type, *e as usize)),
        DataType::Map(m) => format!(
            "MAP<{}, {}>",
            type_string(row_type, m.key as usize),
            type_string(row_type, m.value as usize)
        ),
        DataType::Row(fields) => format!(
            "ROW<{}>",
            fields
                .iter()
                .map(|f| format!(
                    "`{}` {}",
                    f.name,
                    type_string(row_type, f.type_index as usize)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if node.nullable {
        base
    } else {
        format!("{base} NOT NULL")
    }
}

/// Units per second of a TIME/TIMESTAMP value of precision `p` (the contract's time units).
#[inline]
pub fn units_per_second(p: u8) -> i64 {
    match p {
        0 => 1,
        1..=3 => 1_000,
        4..=6 => 1_000_000,
        _ => 1_000_000_000,
    }
}

/// A decoded batch from finished columns and the row errors.
pub fn decoded(cols: Cols, errors: Vec<RowError>) -> DecodedBatch {
    DecodedBatch {
        rows: cols.finish(),
        messages: None,
        kinds: None,
        errors,
    }
}

/// Refuses readable metadata keys for a format that declares none (the host checks the keys against the
/// manifest first, so this is the plugin's own guard).
pub fn no_metadata(format: &str, metadata: &[String]) -> Result<(), ConfigError> {
    match metadata.first() {
        None => Ok(()),
        Some(key) => Err(config_error(
            None,
            format!("format '{format}' has no readable metadata (asked for '{key}')"),
        )),
    }
}

/// Refuses row kinds other than insert for an insert-only format: the host never passes them (the
/// planner refuses such an INSERT), so this is the plugin's own guard.
pub fn inserts_only(format: &str, kinds: Option<&[RowKind]>) -> Result<(), String> {
    match kinds.and_then(|k| k.iter().find(|k| !matches!(k, RowKind::Insert))) {
        None => Ok(()),
        Some(k) => Err(format!(
            "format '{format}' writes inserts only, not {k:?} rows"
        )),
    }
}

/// Payloads under construction, one per row.
#[derive(Debug, Default)]
pub struct Payloads {
    pub payloads: Vec<u8>,
    pub offsets: Vec<u32>,
    pub errors: Vec<RowError>,
}

impl Payloads {
    pub fn with_capacity(rows: usize) -> Payloads {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Payloads {
            payloads: Vec::with_capacity(rows * 64),
            offsets,
            errors: Vec::new(),
        }
    }

    /// Ends the payload of row `index` (the bytes appended to `payloads` since the last one).
    pub fn end(&mut self) {
        self.offsets.push(self.payloads.len() as u32);
    }

    /// Drops whatever row `index` appended and records the error (its payload is empty).
    pub fn fail(&mut self, index: usize, reason: String) {
        let start = *self.offsets.last().unwrap_or(&0) as usize;
        self.payloads.truncate(start);
        self.errors.push(RowError {
            index: index as u32,
            reason,
        });
        self.end();
    }

    pub fn finish(self) -> EncodedBatch {
        EncodedBatch {
            payloads: self.payloads,
            offsets: self.offsets,
            absent: None,
            errors: self.errors,
        }
    }
}

/// UTF-8 with malformed input replaced as Java's decoder does it: like Rust's lossy decoding, except
/// that an encoded surrogate (`ED A0..BF 80..BF`) is one U+FFFD, not three.
pub fn utf8_lossy_java(mut b: &[u8], out: &mut Vec<u8>) {
    loop {
        match std::str::from_utf8(b) {
            Ok(_) => {
                out.extend_from_slice(b);
                return;
            }
            Err(e) => {
                let (good, rest) = b.split_at(e.valid_up_to());
                out.extend_from_slice(good);
                out.extend_from_slice("\u{FFFD}".as_bytes());
                let skip = match rest {
                    [0xED, 0xA0..=0xBF, 0x80..=0xBF, ..] => 3,
                    _ => e.error_len().unwrap_or(rest.len()),
                };
                b = &rest[skip..];
            }
        }
    }
}

/// Java's `String.hashCode` (over UTF-16 code units).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// The iteration order of a `java.util.HashMap` created with `new HashMap<>(keys.len())` and filled
/// with `keys` in order (what Flink's Avro converter writes): indexes into `keys`. Repeated keys keep
/// their first position.
pub fn java_hashmap_order(keys: &[&str]) -> Vec<usize> {
    let n = keys.len();
    let mut cap = n.max(1).next_power_of_two();
    let mut size = 0usize;
    let mut distinct: Vec<usize> = Vec::with_capacity(n);
    for (i, k) in keys.iter().enumerate() {
        if distinct.iter().any(|&j| keys[j] == *k) {
            continue;
        }
        distinct.push(i);
        size += 1;
        if size > (cap as f32 * 0.75) as usize {
            cap *= 2;
        }
    }
    let bucket = |i: usize| {
        let h = java_string_hash(keys[i]);
        let h = h ^ ((h as u32) >> 16) as i32;
        (h as u32 as usize) & (cap - 1)
    };
    distinct.sort_by_key(|&i| bucket(i));
    distinct
}
