//! Changelog rows (ADR 0016): Flink's row kind per row, carried as a last `_row_kind` column that only a
//! batch holding non-inserts has. This module is the only code that knows the column.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use arrow::array::{Array, ArrayRef, BooleanArray, UInt8Array};
use arrow::compute::filter;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

pub use crate::sql::{ChangelogMode, RowKind};

/// The name of the row-kind column.
pub const ROW_KIND_COLUMN: &str = "_row_kind";
/// The field metadata key that marks the row-kind column (a table column of that name is not one).
pub const ROW_KIND_KEY: &str = "pulsar-connect.row-kind";

fn row_kind_field() -> Field {
    Field::new(ROW_KIND_COLUMN, DataType::UInt8, false).with_metadata(HashMap::from([(
        ROW_KIND_KEY.to_owned(),
        "true".to_owned(),
    )]))
}

fn is_row_kind_field(f: &Field) -> bool {
    f.metadata().contains_key(ROW_KIND_KEY)
}

/// The row kinds of `batch`, `None` when every row is an insert (no row-kind column).
pub fn kinds(batch: &RecordBatch) -> Option<&UInt8Array> {
    let schema = batch.schema_ref();
    let last = schema.fields().len().checked_sub(1)?;
    if !is_row_kind_field(schema.field(last)) {
        return None;
    }
    batch.column(last).as_any().downcast_ref::<UInt8Array>()
}

/// The kind of row `i` of a batch's [`kinds`] (`+I` without them).
pub fn kind_at(kinds: Option<&UInt8Array>, i: usize) -> RowKind {
    kinds
        .and_then(|k| RowKind::from_byte(k.value(i)))
        .unwrap_or(RowKind::Insert)
}

/// Splits off the row-kind column: the rows in the table's columns, and their kinds (`None`: inserts).
pub fn split(batch: RecordBatch) -> Result<(RecordBatch, Option<UInt8Array>)> {
    let Some(kinds) = kinds(&batch).cloned() else {
        return Ok((batch, None));
    };
    let mut batch = batch;
    let last = batch.num_columns() - 1;
    batch.remove_column(last);
    Ok((batch, Some(kinds)))
}

/// Appends `kinds` to `batch` as its row-kind column; a batch of inserts only stays as it is, so an
/// append-only stream never carries the column.
pub fn attach(batch: RecordBatch, row_kinds: Option<UInt8Array>) -> Result<RecordBatch> {
    let Some(new) = row_kinds else {
        return Ok(batch);
    };
    if new.len() != batch.num_rows() {
        bail!(
            "internal: {} row kinds for a batch of {} rows",
            new.len(),
            batch.num_rows()
        );
    }
    if new.null_count() > 0 || new.values().iter().any(|&b| b > RowKind::Delete as u8) {
        bail!("internal: a row kind that is not one of +I, -U, +U, -D");
    }
    if new.values().iter().all(|&b| b == RowKind::Insert as u8) {
        return Ok(batch);
    }
    if kinds(&batch).is_some() {
        bail!("internal: the batch already has row kinds");
    }
    let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(row_kind_field()));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(new));
    let rows = batch.num_rows();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new_with_metadata(
            fields,
            batch.schema().metadata().clone(),
        )),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| anyhow!("internal: attaching row kinds: {e}"))
}

/// One batch of `batches` (at least one, same table columns), some of which may carry row kinds.
pub fn concat(batches: &[RecordBatch]) -> Result<RecordBatch> {
    let first = batches
        .first()
        .ok_or_else(|| anyhow!("internal: concatenating no batches"))?;
    if batches.iter().all(|b| kinds(b).is_none()) {
        return Ok(arrow::compute::concat_batches(first.schema_ref(), batches)?);
    }
    let mut rows = Vec::with_capacity(batches.len());
    let mut all = Vec::new();
    for b in batches {
        let (r, k) = split(b.clone())?;
        match k {
            Some(k) => all.extend_from_slice(k.values()),
            None => all.extend(std::iter::repeat_n(RowKind::Insert as u8, r.num_rows())),
        }
        rows.push(r);
    }
    let joined = arrow::compute::concat_batches(rows[0].schema_ref(), &rows)?;
    attach(joined, Some(UInt8Array::from(all)))
}

/// The kinds of the rows a filter keeps.
pub fn filter_kinds(kinds: Option<UInt8Array>, mask: &BooleanArray) -> Result<Option<UInt8Array>> {
    let Some(k) = kinds else { return Ok(None) };
    let kept = filter(&k, mask)?;
    Ok(kept.as_any().downcast_ref::<UInt8Array>().cloned())
}

/// Row kinds from a list (e.g. a decoder's), `None` when all are inserts.
pub fn kinds_array(kinds: &[RowKind]) -> Option<UInt8Array> {
    kinds
        .iter()
        .any(|k| *k != RowKind::Insert)
        .then(|| UInt8Array::from_iter_values(kinds.iter().map(|k| *k as u8)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;

    fn batch(values: &[i32]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, true)])),
            vec![Arc::new(Int32Array::from(values.to_vec()))],
        )
        .unwrap()
    }

    #[test]
    fn inserts_only_carry_no_column() {
        let b = attach(
            batch(&[1, 2]),
            kinds_array(&[RowKind::Insert, RowKind::Insert]),
        )
        .unwrap();
        assert_eq!(b.num_columns(), 1);
        assert!(kinds(&b).is_none());
        let b = attach(batch(&[1, 2]), Some(UInt8Array::from(vec![0, 0]))).unwrap();
        assert_eq!(b.num_columns(), 1);
    }

    #[test]
    fn attach_then_split_gives_the_rows_and_kinds_back() {
        let b = attach(
            batch(&[1, 2, 3]),
            kinds_array(&[RowKind::UpdateBefore, RowKind::UpdateAfter, RowKind::Delete]),
        )
        .unwrap();
        assert_eq!(b.num_columns(), 2);
        let k = kinds(&b);
        assert_eq!(kind_at(k, 0), RowKind::UpdateBefore);
        assert_eq!(kind_at(k, 2), RowKind::Delete);
        let (rows, k) = split(b).unwrap();
        assert_eq!(rows, batch(&[1, 2, 3]));
        assert_eq!(k.unwrap().values().to_vec(), vec![1, 2, 3]);
    }

    #[test]
    fn a_table_column_named_like_the_row_kind_is_not_one() {
        let b = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                ROW_KIND_COLUMN,
                DataType::UInt8,
                true,
            )])),
            vec![Arc::new(UInt8Array::from(vec![3]))],
        )
        .unwrap();
        assert!(kinds(&b).is_none());
        assert_eq!(split(b.clone()).unwrap().0, b);
    }

    #[test]
    fn bad_kinds_are_refused() {
        assert!(attach(batch(&[1]), Some(UInt8Array::from(vec![4]))).is_err());
        assert!(attach(batch(&[1, 2]), Some(UInt8Array::from(vec![1]))).is_err());
    }

    #[test]
    fn batches_with_and_without_kinds_concatenate() {
        let with = attach(
            batch(&[2, 3]),
            kinds_array(&[RowKind::UpdateBefore, RowKind::Delete]),
        )
        .unwrap();
        let joined = concat(&[batch(&[1]), with, batch(&[4])]).unwrap();
        assert_eq!(joined.num_rows(), 4);
        assert_eq!(kinds(&joined).unwrap().values().to_vec(), vec![0, 1, 3, 0]);
        let plain = concat(&[batch(&[1]), batch(&[2])]).unwrap();
        assert_eq!(plain, batch(&[1, 2]));
    }

    #[test]
    fn a_filter_keeps_the_kinds_of_the_rows_it_keeps() {
        let k = kinds_array(&[RowKind::Insert, RowKind::Delete, RowKind::UpdateAfter]);
        let kept = filter_kinds(k, &BooleanArray::from(vec![false, true, true])).unwrap();
        assert_eq!(kept.unwrap().values().to_vec(), vec![3, 2]);
    }
}
