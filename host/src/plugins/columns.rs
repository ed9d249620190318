//! Arrow arrays ⇄ WIT columns. Buffers move as whole lists (O(columns) per batch); columns coming
//! back from a plugin are untrusted and fully validated before they become Arrow arrays.

use std::collections::VecDeque;
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail, ensure};
use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Decimal128Array, MapArray, PrimitiveArray,
    RecordBatch, RecordBatchOptions, StringArray, StructArray,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, ArrowTimestampType, DataType, Date32Type, Field, Float32Type, Float64Type,
    Int8Type, Int16Type, Int32Type, Int64Type, SchemaRef, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};

use super::model;

/// Converts a record batch to WIT columns: column i is field i; children follow their parents.
pub fn to_columns(batch: &RecordBatch) -> anyhow::Result<model::ColumnBatch> {
    let mut columns: Vec<Option<model::Column>> = Vec::new();
    let mut queue: VecDeque<(usize, ArrayRef)> = VecDeque::new();
    for array in batch.columns() {
        columns.push(None);
        queue.push_back((columns.len() - 1, array.clone()));
    }
    while let Some((index, array)) = queue.pop_front() {
        let mut child = |a: ArrayRef| {
            columns.push(None);
            let i = columns.len() - 1;
            queue.push_back((i, a));
            i as u32
        };
        let column = to_column(&array, &mut child)?;
        columns[index] = Some(column);
    }
    Ok(model::ColumnBatch {
        row_count: u32::try_from(batch.num_rows()).context("batch too large")?,
        columns: columns
            .into_iter()
            .map(|c| c.expect("every queued column is converted"))
            .collect(),
    })
}

/// The validity bitmap of an array, starting at bit 0 (`None` when nothing is null).
fn validity(array: &dyn Array) -> Option<Vec<u8>> {
    array
        .nulls()
        .filter(|n| n.null_count() > 0)
        .map(|n| bits(n.inner()))
}

fn bits(b: &BooleanBuffer) -> Vec<u8> {
    let bytes = b.sliced();
    bytes.as_slice()[..b.len().div_ceil(8)].to_vec()
}

/// Rebased offsets and the range of the values they cover.
fn rebase(offsets: &[i32]) -> (Vec<u32>, usize, usize) {
    let first = offsets.first().copied().unwrap_or(0);
    let last = offsets.last().copied().unwrap_or(0);
    (
        offsets.iter().map(|o| (o - first) as u32).collect(),
        first as usize,
        last as usize,
    )
}

fn to_column(
    array: &ArrayRef,
    child: &mut dyn FnMut(ArrayRef) -> u32,
) -> anyhow::Result<model::Column> {
    use model::ColumnData as C;
    let data = match array.data_type() {
        DataType::Boolean => C::Bits(bits(array.as_boolean().values())),
        DataType::Int8 => C::Int8(array.as_primitive::<Int8Type>().values().to_vec()),
        DataType::Int16 => C::Int16(array.as_primitive::<Int16Type>().values().to_vec()),
        DataType::Int32 => C::Int32(array.as_primitive::<Int32Type>().values().to_vec()),
        DataType::Date32 => C::Int32(array.as_primitive::<Date32Type>().values().to_vec()),
        DataType::Time32(TimeUnit::Second) => {
            C::Int32(array.as_primitive::<Time32SecondType>().values().to_vec())
        }
        DataType::Time32(_) => C::Int32(
            array
                .as_primitive::<Time32MillisecondType>()
                .values()
                .to_vec(),
        ),
        DataType::Time64(TimeUnit::Microsecond) => C::Int64(
            array
                .as_primitive::<Time64MicrosecondType>()
                .values()
                .to_vec(),
        ),
        DataType::Time64(_) => C::Int64(
            array
                .as_primitive::<Time64NanosecondType>()
                .values()
                .to_vec(),
        ),
        DataType::Int64 => C::Int64(array.as_primitive::<Int64Type>().values().to_vec()),
        DataType::Timestamp(unit, _) => C::Int64(match unit {
            TimeUnit::Second => array
                .as_primitive::<TimestampSecondType>()
                .values()
                .to_vec(),
            TimeUnit::Millisecond => array
                .as_primitive::<TimestampMillisecondType>()
                .values()
                .to_vec(),
            TimeUnit::Microsecond => array
                .as_primitive::<TimestampMicrosecondType>()
                .values()
                .to_vec(),
            TimeUnit::Nanosecond => array
                .as_primitive::<TimestampNanosecondType>()
                .values()
                .to_vec(),
        }),
        DataType::Float32 => C::Float32(array.as_primitive::<Float32Type>().values().to_vec()),
        DataType::Float64 => C::Float64(array.as_primitive::<Float64Type>().values().to_vec()),
        DataType::Decimal128(_, _) => {
            let values = array
                .as_primitive::<arrow::datatypes::Decimal128Type>()
                .values();
            let mut words = Vec::with_capacity(values.len() * 2);
            for v in values.iter() {
                words.push(*v as u64);
                words.push((*v as u128 >> 64) as u64);
            }
            C::Decimal128(words)
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            let (offsets, start, end) = rebase(a.value_offsets());
            C::Bytes(model::ByteColumn {
                data: a.value_data()[start..end].to_vec(),
                offsets,
            })
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            let (offsets, start, end) = rebase(a.value_offsets());
            C::Bytes(model::ByteColumn {
                data: a.value_data()[start..end].to_vec(),
                offsets,
            })
        }
        DataType::List(_) => {
            let a = array.as_list::<i32>();
            let (offsets, start, end) = rebase(a.value_offsets());
            C::List(model::ListColumn {
                offsets,
                child: child(a.values().slice(start, end - start)),
            })
        }
        DataType::Map(_, _) => {
            let a = array.as_map();
            let (offsets, start, end) = rebase(a.value_offsets());
            let keys = child(a.keys().slice(start, end - start));
            let values = child(a.values().slice(start, end - start));
            C::Map(model::MapColumn {
                offsets,
                keys,
                values,
            })
        }
        DataType::Struct(_) => {
            let a = array.as_struct();
            C::Row(a.columns().iter().map(|c| child(c.clone())).collect())
        }
        other => bail!("Arrow type {other} cannot cross the plugin boundary"),
    };
    Ok(model::Column {
        validity: validity(array.as_ref()),
        data,
    })
}

/// Converts untrusted WIT columns into a record batch of `schema`, checking every length, offset,
/// index and type on the way.
pub fn from_columns(batch: model::ColumnBatch, schema: &SchemaRef) -> anyhow::Result<RecordBatch> {
    let rows = batch.row_count as usize;
    let fields = schema.fields();
    ensure!(
        batch.columns.len() >= fields.len(),
        "{} columns for {} fields",
        batch.columns.len(),
        fields.len()
    );
    let mut columns: Vec<Option<model::Column>> = batch.columns.into_iter().map(Some).collect();
    let mut arrays = Vec::with_capacity(fields.len());
    for (i, field) in fields.iter().enumerate() {
        let array = build(&mut columns, i, field, rows)
            .with_context(|| format!("field `{}`", field.name()))?;
        arrays.push(array);
    }
    if let Some(unused) = columns.iter().position(Option::is_some) {
        bail!("column {unused} is not referenced by any field");
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
        .context("assembling the record batch")
}

fn nulls(validity: Option<Vec<u8>>, len: usize) -> anyhow::Result<Option<NullBuffer>> {
    let Some(bytes) = validity else {
        return Ok(None);
    };
    ensure!(
        bytes.len() >= len.div_ceil(8),
        "validity has {} bytes for {len} values",
        bytes.len()
    );
    Ok(Some(NullBuffer::new(BooleanBuffer::new(
        Buffer::from_vec(bytes),
        0,
        len,
    )))
    .filter(|n| n.null_count() > 0))
}

fn offsets(raw: Vec<u32>, len: usize) -> anyhow::Result<OffsetBuffer<i32>> {
    ensure!(
        raw.len() == len + 1,
        "{} offsets for {len} values",
        raw.len()
    );
    ensure!(raw.first() == Some(&0), "offsets must start at 0");
    ensure!(
        raw.windows(2).all(|w| w[0] <= w[1]),
        "offsets must not decrease"
    );
    ensure!(
        raw.last().is_none_or(|&l| l <= i32::MAX as u32),
        "offsets exceed 2 GiB"
    );
    let values: Vec<i32> = raw.into_iter().map(|o| o as i32).collect();
    Ok(OffsetBuffer::new(ScalarBuffer::from(values)))
}

fn primitive<T: ArrowPrimitiveType>(
    values: Vec<T::Native>,
    len: usize,
    nulls: Option<NullBuffer>,
) -> anyhow::Result<ArrayRef> {
    ensure!(
        values.len() == len,
        "{} values, expected {len}",
        values.len()
    );
    Ok(Arc::new(PrimitiveArray::<T>::try_new(
        ScalarBuffer::from(values),
        nulls,
    )?))
}

fn timestamp<T: ArrowTimestampType>(
    values: ScalarBuffer<i64>,
    nulls: Option<NullBuffer>,
    tz: &Option<Arc<str>>,
) -> anyhow::Result<ArrayRef> {
    let array = PrimitiveArray::<T>::try_new(values, nulls)?;
    Ok(Arc::new(match tz {
        Some(tz) => array.with_timezone(tz.clone()),
        None => array,
    }))
}

/// Builds the array of column `index` for `field`. Children of a ROW may hold
/// nulls under a null parent row even when NOT NULL (Arrow checks they are masked).
fn build(
    columns: &mut [Option<model::Column>],
    index: usize,
    field: &Field,
    len: usize,
) -> anyhow::Result<ArrayRef> {
    build_checked(columns, index, field, len, true)
}

fn build_checked(
    columns: &mut [Option<model::Column>],
    index: usize,
    field: &Field,
    len: usize,
    check_nulls: bool,
) -> anyhow::Result<ArrayRef> {
    use model::ColumnData as C;
    let slot = columns
        .get_mut(index)
        .ok_or_else(|| anyhow!("column {index} does not exist"))?;
    let column = slot
        .take()
        .ok_or_else(|| anyhow!("column {index} is referenced twice"))?;
    let nulls = nulls(column.validity, len).with_context(|| format!("column {index}"))?;
    let dt = field.data_type();
    let mismatch = |got: &str| anyhow!("column {index}: a {dt} field cannot hold {got} data");
    let array: ArrayRef = match (dt, column.data) {
        (DataType::Boolean, C::Bits(b)) => {
            ensure!(
                b.len() >= len.div_ceil(8),
                "column {index}: {} bytes of bits for {len} values",
                b.len()
            );
            Arc::new(BooleanArray::new(
                BooleanBuffer::new(Buffer::from_vec(b), 0, len),
                nulls,
            ))
        }
        (DataType::Int8, C::Int8(v)) => primitive::<Int8Type>(v, len, nulls)?,
        (DataType::Int16, C::Int16(v)) => primitive::<Int16Type>(v, len, nulls)?,
        (DataType::Int32, C::Int32(v)) => primitive::<Int32Type>(v, len, nulls)?,
        (DataType::Date32, C::Int32(v)) => primitive::<Date32Type>(v, len, nulls)?,
        (DataType::Time32(TimeUnit::Second), C::Int32(v)) => {
            primitive::<Time32SecondType>(v, len, nulls)?
        }
        (DataType::Time32(_), C::Int32(v)) => primitive::<Time32MillisecondType>(v, len, nulls)?,
        (DataType::Time64(TimeUnit::Microsecond), C::Int64(v)) => {
            primitive::<Time64MicrosecondType>(v, len, nulls)?
        }
        (DataType::Time64(_), C::Int64(v)) => primitive::<Time64NanosecondType>(v, len, nulls)?,
        (DataType::Int64, C::Int64(v)) => primitive::<Int64Type>(v, len, nulls)?,
        (DataType::Timestamp(unit, tz), C::Int64(v)) => {
            ensure!(
                v.len() == len,
                "column {index}: {} values, expected {len}",
                v.len()
            );
            let values = ScalarBuffer::from(v);
            match unit {
                TimeUnit::Second => timestamp::<TimestampSecondType>(values, nulls, tz)?,
                TimeUnit::Millisecond => timestamp::<TimestampMillisecondType>(values, nulls, tz)?,
                TimeUnit::Microsecond => timestamp::<TimestampMicrosecondType>(values, nulls, tz)?,
                TimeUnit::Nanosecond => timestamp::<TimestampNanosecondType>(values, nulls, tz)?,
            }
        }
        (DataType::Float32, C::Float32(v)) => primitive::<Float32Type>(v, len, nulls)?,
        (DataType::Float64, C::Float64(v)) => primitive::<Float64Type>(v, len, nulls)?,
        (DataType::Decimal128(p, s), C::Decimal128(words)) => {
            ensure!(
                words.len() == 2 * len,
                "column {index}: {} decimal words for {len} values",
                words.len()
            );
            let values: Vec<i128> = words
                .chunks_exact(2)
                .map(|w| ((u128::from(w[1]) << 64) | u128::from(w[0])) as i128)
                .collect();
            let a = Decimal128Array::try_new(ScalarBuffer::from(values), nulls)?
                .with_precision_and_scale(*p, *s)?;
            a.validate_decimal_precision(*p)
                .with_context(|| format!("column {index}"))?;
            Arc::new(a)
        }
        (DataType::Utf8, C::Bytes(b)) => {
            let offsets = offsets(b.offsets, len).with_context(|| format!("column {index}"))?;
            Arc::new(
                StringArray::try_new(offsets, Buffer::from_vec(b.data), nulls)
                    .with_context(|| format!("column {index}"))?,
            )
        }
        (DataType::Binary, C::Bytes(b)) => {
            let offsets = offsets(b.offsets, len).with_context(|| format!("column {index}"))?;
            Arc::new(
                BinaryArray::try_new(offsets, Buffer::from_vec(b.data), nulls)
                    .with_context(|| format!("column {index}"))?,
            )
        }
        (DataType::List(item), C::List(l)) => {
            let offsets = offsets(l.offsets, len).with_context(|| format!("column {index}"))?;
            let child_len = *offsets.last().unwrap_or(&0) as usize;
            let child = child_index(l.child, index)?;
            let values = build(columns, child, item, child_len)?;
            Arc::new(arrow::array::ListArray::try_new(
                item.clone(),
                offsets,
                values,
                nulls,
            )?)
        }
        (DataType::Map(entries, sorted), C::Map(m)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                bail!("MAP entries must be a struct")
            };
            ensure!(kv.len() == 2, "MAP entries must have 2 fields");
            let offsets = offsets(m.offsets, len).with_context(|| format!("column {index}"))?;
            let child_len = *offsets.last().unwrap_or(&0) as usize;
            let keys = build(columns, child_index(m.keys, index)?, &kv[0], child_len)?;
            let values = build(columns, child_index(m.values, index)?, &kv[1], child_len)?;
            let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
            Arc::new(MapArray::try_new(
                entries.clone(),
                offsets,
                entries_array,
                nulls,
                *sorted,
            )?)
        }
        (DataType::Struct(fields), C::Row(children)) => {
            ensure!(
                children.len() == fields.len(),
                "column {index}: {} children for {} fields",
                children.len(),
                fields.len()
            );
            let mut arrays = Vec::with_capacity(fields.len());
            for (f, c) in fields.iter().zip(children) {
                arrays.push(
                    build_checked(columns, child_index(c, index)?, f, len, false)
                        .with_context(|| format!("`{}`", f.name()))?,
                );
            }
            Arc::new(StructArray::try_new_with_length(
                fields.clone(),
                arrays,
                nulls,
                len,
            )?)
        }
        (_, data) => return Err(mismatch(column_kind(&data))),
    };
    ensure!(
        !check_nulls || field.is_nullable() || array.null_count() == 0,
        "column {index}: NULL in NOT NULL field `{}`",
        field.name()
    );
    Ok(array)
}

fn child_index(child: u32, parent: usize) -> anyhow::Result<usize> {
    let child = child as usize;
    ensure!(
        child > parent,
        "column {parent} refers to child {child}: children must come after their parent"
    );
    Ok(child)
}

fn column_kind(data: &model::ColumnData) -> &'static str {
    use model::ColumnData as C;
    match data {
        C::Bits(_) => "bits",
        C::Int8(_) => "int8",
        C::Int16(_) => "int16",
        C::Int32(_) => "int32",
        C::Int64(_) => "int64",
        C::Float32(_) => "float32",
        C::Float64(_) => "float64",
        C::Decimal128(_) => "decimal128",
        C::Bytes(_) => "bytes",
        C::List(_) => "list",
        C::Map(_) => "map",
        C::Row(_) => "row",
    }
}
