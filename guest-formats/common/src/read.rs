//! Typed, checked access to a [`ColumnBatch`] for encoders: values are read straight from the columns
//! (no `Value` per field). [`Reader::new`] checks the whole layout once, so the accessors can index
//! without further checks failing.

use crate::{ColumnBatch, ColumnData, DataType, RowType, bit};

/// A checked view of a column batch.
pub struct Reader<'a> {
    pub rt: &'a RowType,
    pub batch: &'a ColumnBatch,
}

fn expect_len(what: &str, c: usize, have: usize, need: usize) -> Result<(), String> {
    if have < need {
        Err(format!(
            "column {c}: {what} has {have} entries, {need} needed"
        ))
    } else {
        Ok(())
    }
}

fn check_offsets(c: usize, offsets: &[u32], n: usize, data_len: usize) -> Result<usize, String> {
    expect_len("offsets", c, offsets.len(), n + 1)?;
    if offsets[0] != 0 || offsets[..=n].windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("column {c}: offsets are not ascending from 0"));
    }
    let end = offsets[n] as usize;
    if end > data_len {
        return Err(format!("column {c}: offsets reach {end}, past {data_len}"));
    }
    Ok(end)
}

impl<'a> Reader<'a> {
    /// Checks that `batch` holds `row_type`'s columns with enough values everywhere.
    pub fn new(rt: &'a RowType, batch: &'a ColumnBatch) -> Result<Reader<'a>, String> {
        let r = Reader { rt, batch };
        let n = batch.row_count as usize;
        for (c, f) in rt.fields.iter().enumerate() {
            r.check(c, f.type_index as usize, n, 0)?;
        }
        Ok(r)
    }

    fn check(&self, c: usize, ty: usize, n: usize, depth: usize) -> Result<(), String> {
        if depth > 64 {
            return Err("nesting too deep".into());
        }
        let col = self
            .batch
            .columns
            .get(c)
            .ok_or_else(|| format!("column {c} is missing"))?;
        let node = self
            .rt
            .types
            .get(ty)
            .ok_or_else(|| format!("type {ty} is missing"))?;
        if let Some(v) = &col.validity {
            expect_len("validity", c, v.len() * 8, n)?;
        }
        let mismatch = || format!("column {c} does not match its type {:?}", node.data_type);
        match (&node.data_type, &col.data) {
            (DataType::Boolean, ColumnData::Bits(b)) => expect_len("bits", c, b.len() * 8, n),
            (DataType::Tinyint, ColumnData::Int8(d)) => expect_len("values", c, d.len(), n),
            (DataType::Smallint, ColumnData::Int16(d)) => expect_len("values", c, d.len(), n),
            (DataType::Int | DataType::Date, ColumnData::Int32(d)) => {
                expect_len("values", c, d.len(), n)
            }
            (DataType::Time(p), ColumnData::Int32(d)) if *p <= 3 => {
                expect_len("values", c, d.len(), n)
            }
            (
                DataType::Bigint
                | DataType::Time(_)
                | DataType::Timestamp(_)
                | DataType::TimestampLtz(_),
                ColumnData::Int64(d),
            ) => expect_len("values", c, d.len(), n),
            (DataType::Float, ColumnData::Float32(d)) => expect_len("values", c, d.len(), n),
            (DataType::Double, ColumnData::Float64(d)) => expect_len("values", c, d.len(), n),
            (DataType::Decimal(_), ColumnData::Decimal128(d)) => {
                expect_len("words", c, d.len(), 2 * n)
            }
            (
                DataType::Char(_)
                | DataType::Varchar(_)
                | DataType::Binary(_)
                | DataType::Varbinary(_),
                ColumnData::Bytes(b),
            ) => {
                let end = check_offsets(c, &b.offsets, n, b.data.len())?;
                if matches!(node.data_type, DataType::Char(_) | DataType::Varchar(_)) {
                    std::str::from_utf8(&b.data[..end])
                        .map_err(|e| format!("column {c}: invalid UTF-8: {e}"))?;
                }
                Ok(())
            }
            (DataType::Array(e), ColumnData::List(l)) => {
                let end = check_offsets(c, &l.offsets, n, usize::MAX)?;
                self.check(l.child as usize, *e as usize, end, depth + 1)
            }
            (DataType::Map(m), ColumnData::Map(l)) => {
                let end = check_offsets(c, &l.offsets, n, usize::MAX)?;
                self.check(l.keys as usize, m.key as usize, end, depth + 1)?;
                self.check(l.values as usize, m.value as usize, end, depth + 1)
            }
            (DataType::Row(fields), ColumnData::Row(children)) => {
                if fields.len() != children.len() {
                    return Err(mismatch());
                }
                for (f, ch) in fields.iter().zip(children) {
                    self.check(*ch as usize, f.type_index as usize, n, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(mismatch()),
        }
    }

    #[inline]
    pub fn is_null(&self, c: usize, i: usize) -> bool {
        !bit(self.batch.columns[c].validity.as_deref(), i)
    }

    #[inline]
    pub fn data(&self, c: usize) -> &'a ColumnData {
        &self.batch.columns[c].data
    }

    #[inline]
    pub fn bool(&self, c: usize, i: usize) -> bool {
        match self.data(c) {
            ColumnData::Bits(b) => bit(Some(b), i),
            _ => false,
        }
    }

    /// Any integer column (also DATE/TIME/TIMESTAMP) as i64.
    #[inline]
    pub fn int(&self, c: usize, i: usize) -> i64 {
        match self.data(c) {
            ColumnData::Int8(d) => i64::from(d[i]),
            ColumnData::Int16(d) => i64::from(d[i]),
            ColumnData::Int32(d) => i64::from(d[i]),
            ColumnData::Int64(d) => d[i],
            _ => 0,
        }
    }

    #[inline]
    pub fn f32(&self, c: usize, i: usize) -> f32 {
        match self.data(c) {
            ColumnData::Float32(d) => d[i],
            _ => 0.0,
        }
    }

    #[inline]
    pub fn f64(&self, c: usize, i: usize) -> f64 {
        match self.data(c) {
            ColumnData::Float64(d) => d[i],
            _ => 0.0,
        }
    }

    #[inline]
    pub fn decimal(&self, c: usize, i: usize) -> i128 {
        match self.data(c) {
            ColumnData::Decimal128(d) => {
                ((u128::from(d[2 * i + 1]) << 64) | u128::from(d[2 * i])) as i128
            }
            _ => 0,
        }
    }

    #[inline]
    pub fn bytes(&self, c: usize, i: usize) -> &'a [u8] {
        match self.data(c) {
            ColumnData::Bytes(b) => &b.data[b.offsets[i] as usize..b.offsets[i + 1] as usize],
            _ => &[],
        }
    }

    /// A checked-UTF-8 string value.
    #[inline]
    pub fn str(&self, c: usize, i: usize) -> &'a str {
        std::str::from_utf8(self.bytes(c, i)).unwrap_or("")
    }

    /// Entries of list or map value i: (start, end) in the child column(s).
    #[inline]
    pub fn range(&self, c: usize, i: usize) -> (usize, usize) {
        match self.data(c) {
            ColumnData::List(l) => (l.offsets[i] as usize, l.offsets[i + 1] as usize),
            ColumnData::Map(m) => (m.offsets[i] as usize, m.offsets[i + 1] as usize),
            _ => (0, 0),
        }
    }

    #[inline]
    pub fn list_child(&self, c: usize) -> usize {
        match self.data(c) {
            ColumnData::List(l) => l.child as usize,
            _ => 0,
        }
    }

    #[inline]
    pub fn map_children(&self, c: usize) -> (usize, usize) {
        match self.data(c) {
            ColumnData::Map(m) => (m.keys as usize, m.values as usize),
            _ => (0, 0),
        }
    }

    #[inline]
    pub fn row_children(&self, c: usize) -> &'a [u32] {
        match self.data(c) {
            ColumnData::Row(ch) => ch,
            _ => &[],
        }
    }
}
