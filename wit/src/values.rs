//! One value of a row, for row-at-a-time plugin code.

/// A value of any Flink SQL type. Integer widths follow the logical type; temporal values are plain
/// numbers in the unit the column's precision gives (p = 0 seconds, 1..3 milliseconds, 4..6
/// microseconds, 7..9 nanoseconds).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// BOOLEAN.
    Bool(bool),
    /// TINYINT.
    I8(i8),
    /// SMALLINT.
    I16(i16),
    /// INT.
    I32(i32),
    /// BIGINT.
    I64(i64),
    /// FLOAT.
    F32(f32),
    /// DOUBLE.
    F64(f64),
    /// The unscaled value of a DECIMAL(p, s): 12.34 in DECIMAL(5, 2) is `Decimal(1234)`.
    Decimal(i128),
    /// CHAR / VARCHAR / STRING.
    String(String),
    /// BINARY / VARBINARY / BYTES.
    Bytes(Vec<u8>),
    /// DATE: days since 1970-01-01.
    Date(i32),
    /// TIME(p): time of day in the precision's unit.
    Time(i64),
    /// TIMESTAMP(p) or TIMESTAMP_LTZ(p): since 1970-01-01T00:00 in the precision's unit.
    Timestamp(i64),
    /// ARRAY: the elements.
    Array(Vec<Value>),
    /// MAP: the (key, value) entries in order.
    Map(Vec<(Value, Value)>),
    /// ROW: the field values in declared order.
    Row(Vec<Value>),
}

impl Value {
    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A short name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "BOOLEAN",
            Value::I8(_) => "TINYINT",
            Value::I16(_) => "SMALLINT",
            Value::I32(_) => "INT",
            Value::I64(_) => "BIGINT",
            Value::F32(_) => "FLOAT",
            Value::F64(_) => "DOUBLE",
            Value::Decimal(_) => "DECIMAL",
            Value::String(_) => "STRING",
            Value::Bytes(_) => "BYTES",
            Value::Date(_) => "DATE",
            Value::Time(_) => "TIME",
            Value::Timestamp(_) => "TIMESTAMP",
            Value::Array(_) => "ARRAY",
            Value::Map(_) => "MAP",
            Value::Row(_) => "ROW",
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::I32(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::String(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
