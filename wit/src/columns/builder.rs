//! The typed column builder: decoders push values straight into the columns of a [`ColumnBatch`], no
//! per-value allocation. The top-level fields are columns `0..n`, nested children follow, allocated
//! breadth-first.

use crate::format::pulsar_connect::plugin::types::{
    ByteColumn, Column, ColumnBatch, ColumnData, DataType, ListColumn, MapColumn, RowType,
};

/// The typed data of a column under construction (the WIT `column-data` cases).
#[derive(Debug)]
pub enum Data {
    /// BOOLEAN: one bit per value, LSB first.
    Bits(Vec<u8>),
    /// TINYINT.
    I8(Vec<i8>),
    /// SMALLINT.
    I16(Vec<i16>),
    /// INT, DATE, TIME(0..3).
    I32(Vec<i32>),
    /// BIGINT, TIME(4..9), TIMESTAMP, TIMESTAMP_LTZ.
    I64(Vec<i64>),
    /// FLOAT.
    F32(Vec<f32>),
    /// DOUBLE.
    F64(Vec<f64>),
    /// DECIMAL: the unscaled i128 as two words per value (low, high).
    Dec(Vec<u64>),
    /// CHAR / VARCHAR / BINARY / VARBINARY: value i is `data[offsets[i]..offsets[i + 1]]`.
    Bytes {
        /// The values' bytes, concatenated.
        data: Vec<u8>,
        /// One offset per value plus a leading 0.
        offsets: Vec<u32>,
    },
    /// ARRAY: the elements of value i are `offsets[i]..offsets[i + 1]` of the child column.
    List {
        /// One offset per value plus a leading 0.
        offsets: Vec<u32>,
        /// The index of the element column in [`Cols::cols`].
        child: usize,
    },
    /// MAP: entries of value i are `offsets[i]..offsets[i + 1]` of the key and value columns.
    Map {
        /// One offset per value plus a leading 0.
        offsets: Vec<u32>,
        /// The index of the key column in [`Cols::cols`].
        keys: usize,
        /// The index of the value column in [`Cols::cols`].
        values: usize,
    },
    /// ROW: the indexes of the field columns in [`Cols::cols`].
    Row(Vec<usize>),
}

/// One column under construction.
#[derive(Debug)]
pub struct Col {
    /// Index into the row type's `types`.
    pub ty: usize,
    /// The validity bits, or empty while every value is valid (`nulls` false): a column without
    /// NULLs sets no bits; the first NULL writes the ones before it.
    validity: Vec<u8>,
    nulls: bool,
    len: usize,
    /// The values so far.
    pub data: Data,
}

impl Col {
    /// Writes the validity bits of the values so far (all valid), before the first NULL.
    #[cold]
    #[inline(never)]
    fn first_null(&mut self) {
        self.nulls = true;
        self.validity.clear();
        self.validity.resize(self.len / 8, 0xff);
        if !self.len.is_multiple_of(8) {
            self.validity.push((1u8 << (self.len % 8)) - 1);
        }
    }
}

/// Columns under construction. A decoder pushes one value per column per row (nested columns as
/// their parents say) and calls [`Cols::end_row`], or [`Cols::rollback`] to drop a half-built row.
#[derive(Debug)]
pub struct Cols {
    /// Every column: the top-level ones first, nested children after their parents.
    pub cols: Vec<Col>,
    rows: usize,
    top: usize,
}

#[inline(always)]
fn set_bit(bits: &mut Vec<u8>, i: usize, v: bool) {
    if i.is_multiple_of(8) {
        bits.push(0);
    }
    if v {
        let last = bits.len() - 1;
        bits[last] |= 1 << (i % 8);
    }
}

/// `data.extend_from_slice(v)`; on wasm, values of 4 to 16 bytes as two overlapping fixed-size
/// words ([`extend_by_words`]) instead of a copy of variable length (a `memory.copy`, which wasmtime
/// runs as a call out of the guest's code; natively the C library's `memcpy` is the cheaper one).
#[inline(always)]
fn extend_short(data: &mut Vec<u8>, v: &[u8]) {
    if !(cfg!(target_arch = "wasm32") && extend_by_words(data, v)) {
        data.extend_from_slice(v);
    }
}

/// Appends `v` as two overlapping words when it is 4 to 16 bytes long (true), else nothing (false).
#[inline(always)]
fn extend_by_words(data: &mut Vec<u8>, v: &[u8]) -> bool {
    let n = v.len();
    let start = data.len();
    if (8..=16).contains(&n) {
        let (head, tail) = (word8(v, 0), word8(v, n - 8));
        data.extend_from_slice(&head);
        data.truncate(start + n - 8);
        data.extend_from_slice(&tail);
        true
    } else if (4..8).contains(&n) {
        let (head, tail) = (word4(v, 0), word4(v, n - 4));
        data.extend_from_slice(&head);
        data.truncate(start + n - 4);
        data.extend_from_slice(&tail);
        true
    } else {
        false
    }
}

#[inline(always)]
fn word8(v: &[u8], at: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&v[at..at + 8]);
    w
}

#[inline(always)]
fn word4(v: &[u8], at: usize) -> [u8; 4] {
    let mut w = [0u8; 4];
    w.copy_from_slice(&v[at..at + 4]);
    w
}

fn truncate_bits(bits: &mut Vec<u8>, n: usize) {
    bits.truncate(n.div_ceil(8));
    if !n.is_multiple_of(8)
        && let Some(last) = bits.last_mut()
    {
        *last &= (1u8 << (n % 8)) - 1;
    }
}

impl Cols {
    /// Columns for `row_type` (assumed validated: children after parents, indexes in range).
    pub fn new(row_type: &RowType) -> Cols {
        let mut cols: Vec<Col> = Vec::new();
        let alloc = |cols: &mut Vec<Col>, ty: usize| {
            cols.push(Col {
                ty,
                validity: Vec::new(),
                nulls: false,
                len: 0,
                data: Data::Row(Vec::new()),
            });
            cols.len() - 1
        };
        for f in &row_type.fields {
            alloc(&mut cols, f.type_index as usize);
        }
        let mut i = 0;
        while i < cols.len() {
            let data = match &row_type.types[cols[i].ty].data_type {
                DataType::Array(e) => Data::List {
                    offsets: vec![0],
                    child: alloc(&mut cols, *e as usize),
                },
                DataType::Map(m) => Data::Map {
                    offsets: vec![0],
                    keys: alloc(&mut cols, m.key as usize),
                    values: alloc(&mut cols, m.value as usize),
                },
                DataType::Row(fields) => Data::Row(
                    fields
                        .iter()
                        .map(|f| alloc(&mut cols, f.type_index as usize))
                        .collect(),
                ),
                DataType::Boolean => Data::Bits(Vec::new()),
                DataType::Tinyint => Data::I8(Vec::new()),
                DataType::Smallint => Data::I16(Vec::new()),
                DataType::Int | DataType::Date => Data::I32(Vec::new()),
                DataType::Time(p) if *p <= 3 => Data::I32(Vec::new()),
                DataType::Bigint
                | DataType::Time(_)
                | DataType::Timestamp(_)
                | DataType::TimestampLtz(_) => Data::I64(Vec::new()),
                DataType::Float => Data::F32(Vec::new()),
                DataType::Double => Data::F64(Vec::new()),
                DataType::Decimal(_) => Data::Dec(Vec::new()),
                DataType::Char(_)
                | DataType::Varchar(_)
                | DataType::Binary(_)
                | DataType::Varbinary(_) => Data::Bytes {
                    data: Vec::new(),
                    offsets: vec![0],
                },
            };
            cols[i].data = data;
            i += 1;
        }
        Cols {
            cols,
            rows: 0,
            top: row_type.fields.len(),
        }
    }

    /// Reserves room for `rows` more top-level values (and `bytes` more bytes in each top-level
    /// bytes column), so that filling a batch does not reallocate.
    pub fn reserve(&mut self, rows: usize, bytes: usize) {
        for col in self.cols.iter_mut().take(self.top) {
            match &mut col.data {
                Data::Bits(v) => v.reserve(rows / 8 + 1),
                Data::I8(v) => v.reserve(rows),
                Data::I16(v) => v.reserve(rows),
                Data::I32(v) => v.reserve(rows),
                Data::I64(v) => v.reserve(rows),
                Data::F32(v) => v.reserve(rows),
                Data::F64(v) => v.reserve(rows),
                Data::Dec(v) => v.reserve(2 * rows),
                Data::Bytes { data, offsets } => {
                    data.reserve(bytes);
                    offsets.reserve(rows);
                }
                Data::List { offsets, .. } | Data::Map { offsets, .. } => offsets.reserve(rows),
                Data::Row(_) => {}
            }
        }
    }

    /// Rows completed so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values in column `c` so far.
    pub fn len(&self, c: usize) -> usize {
        self.cols[c].len
    }

    /// Whether no row has been ended yet.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Marks the current row complete (every top-level column must hold `rows + 1` values).
    #[inline]
    pub fn end_row(&mut self) {
        self.rows += 1;
    }

    /// Drops whatever the current (incomplete) row pushed.
    pub fn rollback(&mut self) {
        for c in 0..self.top {
            self.truncate(c, self.rows);
        }
    }

    /// Cuts column `c` (and its children) back to `n` values. Children of a nested column are cut
    /// to what its first `n` values use, even when `c` itself holds exactly `n` (a value being built).
    pub fn truncate(&mut self, c: usize, n: usize) {
        let col = &mut self.cols[c];
        if col.len < n {
            return;
        }
        if col.len > n {
            col.len = n;
            if col.nulls {
                truncate_bits(&mut col.validity, n);
            }
            match &mut col.data {
                Data::Bits(b) => truncate_bits(b, n),
                Data::I8(v) => v.truncate(n),
                Data::I16(v) => v.truncate(n),
                Data::I32(v) => v.truncate(n),
                Data::I64(v) => v.truncate(n),
                Data::F32(v) => v.truncate(n),
                Data::F64(v) => v.truncate(n),
                Data::Dec(v) => v.truncate(2 * n),
                Data::Bytes { data, offsets } => {
                    offsets.truncate(n + 1);
                    data.truncate(offsets[n] as usize);
                }
                Data::List { offsets, .. } | Data::Map { offsets, .. } => offsets.truncate(n + 1),
                Data::Row(_) => {}
            }
        }
        match &self.cols[c].data {
            Data::List { offsets, child } => {
                let (child, to) = (*child, offsets[n] as usize);
                self.truncate(child, to);
            }
            Data::Map {
                offsets,
                keys,
                values,
            } => {
                let (k, v, to) = (*keys, *values, offsets[n] as usize);
                self.truncate(k, to);
                self.truncate(v, to);
            }
            Data::Bytes { data, offsets } if data.len() > offsets[n] as usize => {
                let to = offsets[n] as usize;
                if let Data::Bytes { data, .. } = &mut self.cols[c].data {
                    data.truncate(to);
                }
            }
            Data::Row(ch) => {
                for child in ch.clone() {
                    self.truncate(child, n);
                }
            }
            _ => {}
        }
    }

    #[inline(always)]
    fn valid(&mut self, c: usize, v: bool) -> &mut Col {
        let col = &mut self.cols[c];
        if !v && !col.nulls {
            col.first_null();
        }
        if col.nulls {
            set_bit(&mut col.validity, col.len, v);
        }
        col.len += 1;
        col
    }

    /// Appends a NULL (nested columns: an empty list / map, NULL children for a row).
    pub fn push_null(&mut self, c: usize) {
        let col = self.valid(c, false);
        let len = col.len;
        let mut row_children = None;
        match &mut col.data {
            Data::Bits(b) => set_bit(b, len - 1, false),
            Data::I8(v) => v.push(0),
            Data::I16(v) => v.push(0),
            Data::I32(v) => v.push(0),
            Data::I64(v) => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Dec(v) => v.extend_from_slice(&[0, 0]),
            Data::Bytes { data, offsets } => offsets.push(data.len() as u32),
            Data::List { offsets, .. } | Data::Map { offsets, .. } => {
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last);
            }
            Data::Row(ch) => row_children = Some(ch.clone()),
        }
        if let Some(ch) = row_children {
            for c in ch {
                self.push_null(c);
            }
        }
    }

    /// Pushes a BOOLEAN value into column `c`.
    #[inline]
    pub fn push_bool(&mut self, c: usize, v: bool) {
        let col = self.valid(c, true);
        let i = col.len - 1;
        if let Data::Bits(b) = &mut col.data {
            set_bit(b, i, v);
        }
    }

    /// Pushes a TINYINT value into column `c`.
    #[inline]
    pub fn push_i8(&mut self, c: usize, v: i8) {
        if let Data::I8(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// Pushes a SMALLINT value into column `c`.
    #[inline]
    pub fn push_i16(&mut self, c: usize, v: i16) {
        if let Data::I16(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// Pushes an INT (or DATE / TIME(0..3)) value into column `c`.
    #[inline]
    pub fn push_i32(&mut self, c: usize, v: i32) {
        if let Data::I32(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// Pushes a BIGINT (or TIME(4..9) / TIMESTAMP) value into column `c`.
    #[inline]
    pub fn push_i64(&mut self, c: usize, v: i64) {
        if let Data::I64(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// An integer into whichever integer column `c` is (the caller checked the range).
    #[inline(always)]
    pub fn push_int(&mut self, c: usize, v: i64) {
        match &mut self.valid(c, true).data {
            Data::I8(d) => d.push(v as i8),
            Data::I16(d) => d.push(v as i16),
            Data::I32(d) => d.push(v as i32),
            Data::I64(d) => d.push(v),
            _ => {}
        }
    }

    /// Pushes a FLOAT value into column `c`.
    #[inline]
    pub fn push_f32(&mut self, c: usize, v: f32) {
        if let Data::F32(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// Pushes a DOUBLE value into column `c`.
    #[inline]
    pub fn push_f64(&mut self, c: usize, v: f64) {
        if let Data::F64(d) = &mut self.valid(c, true).data {
            d.push(v);
        }
    }

    /// Pushes the unscaled value of a DECIMAL into column `c`.
    #[inline]
    pub fn push_decimal(&mut self, c: usize, v: i128) {
        if let Data::Dec(d) = &mut self.valid(c, true).data {
            d.push(v as u64);
            d.push(((v as u128) >> 64) as u64);
        }
    }

    /// Pushes a string or binary value into column `c`.
    #[inline(always)]
    pub fn push_bytes(&mut self, c: usize, v: &[u8]) {
        if let Data::Bytes { data, offsets } = &mut self.valid(c, true).data {
            extend_short(data, v);
            offsets.push(data.len() as u32);
        }
    }

    /// The byte buffer of bytes column `c`, to append a value in pieces; finish with
    /// [`Cols::finish_bytes`].
    #[inline]
    pub fn bytes_buf(&mut self, c: usize) -> &mut Vec<u8> {
        match &mut self.cols[c].data {
            Data::Bytes { data, .. } => data,
            _ => panic!("column {c} is not a bytes column"),
        }
    }

    /// Ends a value appended with [`Cols::bytes_buf`].
    #[inline]
    pub fn finish_bytes(&mut self, c: usize) {
        if let Data::Bytes { data, offsets } = &mut self.valid(c, true).data {
            offsets.push(data.len() as u32);
        }
    }

    /// Drops bytes appended with [`Cols::bytes_buf`] since the last finished value.
    pub fn abandon_bytes(&mut self, c: usize) {
        if let Data::Bytes { data, offsets } = &mut self.cols[c].data {
            data.truncate(*offsets.last().unwrap_or(&0) as usize);
        }
    }

    /// The child column of list column `c`.
    pub fn list_child(&self, c: usize) -> usize {
        match &self.cols[c].data {
            Data::List { child, .. } => *child,
            _ => panic!("column {c} is not a list column"),
        }
    }

    /// Key and value columns of map column `c`.
    pub fn map_children(&self, c: usize) -> (usize, usize) {
        match &self.cols[c].data {
            Data::Map { keys, values, .. } => (*keys, *values),
            _ => panic!("column {c} is not a map column"),
        }
    }

    /// The field columns of row column `c`.
    pub fn row_children(&self, c: usize) -> &[usize] {
        match &self.cols[c].data {
            Data::Row(ch) => ch,
            _ => panic!("column {c} is not a row column"),
        }
    }

    /// Ends a list (or map) value of column `c` whose elements were pushed into its child columns.
    pub fn end_list(&mut self, c: usize) {
        let end = match &self.cols[c].data {
            Data::List { child, .. } => self.cols[*child].len,
            Data::Map { keys, .. } => self.cols[*keys].len,
            _ => return,
        };
        match &mut self.valid(c, true).data {
            Data::List { offsets, .. } | Data::Map { offsets, .. } => offsets.push(end as u32),
            _ => {}
        }
    }

    /// Marks a non-null row value in column `c`; its fields are pushed into the children.
    pub fn push_row_valid(&mut self, c: usize) {
        self.valid(c, true);
    }

    /// The finished batch.
    pub fn finish(self) -> ColumnBatch {
        let rows = self.rows as u32;
        let columns = self
            .cols
            .into_iter()
            .map(|c| {
                let all_valid = !c.nulls || {
                    let full = c.len / 8;
                    c.validity[..full].iter().all(|&b| b == 0xff)
                        && (c.len.is_multiple_of(8) || c.validity[full] == (1u8 << (c.len % 8)) - 1)
                };
                Column {
                    validity: (!all_valid).then_some(c.validity),
                    data: match c.data {
                        Data::Bits(b) => ColumnData::Bits(b),
                        Data::I8(d) => ColumnData::Int8(d),
                        Data::I16(d) => ColumnData::Int16(d),
                        Data::I32(d) => ColumnData::Int32(d),
                        Data::I64(d) => ColumnData::Int64(d),
                        Data::F32(d) => ColumnData::Float32(d),
                        Data::F64(d) => ColumnData::Float64(d),
                        Data::Dec(d) => ColumnData::Decimal128(d),
                        Data::Bytes { data, offsets } => {
                            ColumnData::Bytes(ByteColumn { data, offsets })
                        }
                        Data::List { offsets, child } => ColumnData::List(ListColumn {
                            offsets,
                            child: child as u32,
                        }),
                        Data::Map {
                            offsets,
                            keys,
                            values,
                        } => ColumnData::Map(MapColumn {
                            offsets,
                            keys: keys as u32,
                            values: values as u32,
                        }),
                        Data::Row(ch) => {
                            ColumnData::Row(ch.into_iter().map(|c| c as u32).collect())
                        }
                    },
                }
            })
            .collect();
        ColumnBatch {
            row_count: rows,
            columns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extend_by_words_appends_the_bytes() {
        for n in 0..=20u8 {
            let v: Vec<u8> = (1..=n).collect();
            for before in [0usize, 1, 7, 8, 13] {
                let mut data = vec![0xAA; before];
                let mut want = data.clone();
                want.extend_from_slice(&v);
                if !extend_by_words(&mut data, &v) {
                    assert!(!(4..=16).contains(&n), "{n}");
                    data.extend_from_slice(&v);
                }
                assert_eq!(data, want, "{n} bytes after {before}");
            }
        }
    }
}
