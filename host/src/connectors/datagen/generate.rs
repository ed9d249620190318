//! Column generators for `datagen`, building Arrow arrays directly (nested types recursively).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use arrow::array::*;
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;
use rand::Rng;
use rand::distr::{Alphanumeric, SampleString};
use rand::rngs::SmallRng;

/// How one column is generated.
#[derive(Debug, Clone, Default)]
pub struct FieldSpec {
    pub kind: Kind,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub length: Option<usize>,
    pub null_rate: f64,
    pub max_past: Duration,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Random,
    /// `start..=end`; the row with index i gets `start + i`.
    Sequence { start: i64, end: i64 },
}

/// `n` rows; `first` is the index of the first row (for sequences).
pub fn batch(
    schema: &SchemaRef,
    specs: &[FieldSpec],
    first: u64,
    n: usize,
    rng: &mut SmallRng,
) -> Result<RecordBatch> {
    let mut cols = Vec::with_capacity(specs.len());
    for (field, spec) in schema.fields().iter().zip(specs) {
        let nulls = if spec.null_rate > 0.0 && field.is_nullable() {
            Some(NullBuffer::from(
                (0..n)
                    .map(|_| rng.random::<f64>() >= spec.null_rate)
                    .collect::<Vec<bool>>(),
            ))
        } else {
            None
        };
        let col = match spec.kind {
            Kind::Sequence { start, .. } => {
                sequence(field.data_type(), start as i128 + first as i128, n)?
            }
            Kind::Random => random(field.data_type(), spec, n, rng)?,
        };
        cols.push(with_nulls(col, nulls)?);
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}

fn with_nulls(col: ArrayRef, nulls: Option<NullBuffer>) -> Result<ArrayRef> {
    let Some(nulls) = nulls else { return Ok(col) };
    let data = col.to_data().into_builder().nulls(Some(nulls)).build()?;
    Ok(make_array(data))
}

fn sequence(dt: &DataType, from: i128, n: usize) -> Result<ArrayRef> {
    let it = (0..n as i128).map(|i| from + i);
    Ok(match dt {
        DataType::Int8 => Arc::new(Int8Array::from_iter_values(it.map(|v| v as i8))),
        DataType::Int16 => Arc::new(Int16Array::from_iter_values(it.map(|v| v as i16))),
        DataType::Int32 => Arc::new(Int32Array::from_iter_values(it.map(|v| v as i32))),
        DataType::Int64 => Arc::new(Int64Array::from_iter_values(it.map(|v| v as i64))),
        DataType::Float32 => Arc::new(Float32Array::from_iter_values(it.map(|v| v as f32))),
        DataType::Float64 => Arc::new(Float64Array::from_iter_values(it.map(|v| v as f64))),
        DataType::Decimal128(p, s) => {
            let scale = 10i128.pow(*s as u32);
            Arc::new(
                Decimal128Array::from_iter_values(it.map(|v| v * scale))
                    .with_precision_and_scale(*p, *s)?,
            )
        }
        DataType::Utf8 => Arc::new(StringArray::from_iter_values(it.map(|v| v.to_string()))),
        other => bail!("sequence cannot generate {other}"),
    })
}

fn uniform(rng: &mut SmallRng, min: f64, max: f64) -> f64 {
    // Halves avoid overflow when the range spans the whole f64 domain.
    min + (max / 2.0 - min / 2.0) * rng.random::<f64>() * 2.0
}

fn int_range<T: Into<i128> + Copy>(spec: &FieldSpec, lo: T, hi: T) -> (i128, i128) {
    let lo = spec
        .min
        .map(|v| (v.ceil() as i128).max(lo.into()))
        .unwrap_or(lo.into());
    let hi = spec
        .max
        .map(|v| (v.floor() as i128).min(hi.into()))
        .unwrap_or(hi.into());
    (lo, hi.max(lo))
}

fn random(dt: &DataType, spec: &FieldSpec, n: usize, rng: &mut SmallRng) -> Result<ArrayRef> {
    macro_rules! ints {
        ($arr:ty, $t:ty) => {{
            let (lo, hi) = int_range(spec, <$t>::MIN, <$t>::MAX);
            Arc::new(<$arr>::from_iter_values(
                (0..n).map(|_| rng.random_range(lo..=hi) as $t),
            )) as ArrayRef
        }};
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let past_ms = spec.max_past.as_millis() as i64;
    let instant_ms = |rng: &mut SmallRng| {
        if past_ms > 0 {
            now_ms - rng.random_range(0..=past_ms)
        } else {
            now_ms
        }
    };
    Ok(match dt {
        DataType::Boolean => Arc::new(BooleanArray::from_iter(
            (0..n).map(|_| Some(rng.random::<bool>())),
        )),
        DataType::Int8 => ints!(Int8Array, i8),
        DataType::Int16 => ints!(Int16Array, i16),
        DataType::Int32 => ints!(Int32Array, i32),
        DataType::Int64 => ints!(Int64Array, i64),
        DataType::Float32 => {
            let (lo, hi) = (spec.min.unwrap_or(0.0), spec.max.unwrap_or(1e6));
            Arc::new(Float32Array::from_iter_values(
                (0..n).map(|_| uniform(rng, lo, hi) as f32),
            ))
        }
        DataType::Float64 => {
            let (lo, hi) = (spec.min.unwrap_or(0.0), spec.max.unwrap_or(1e6));
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|_| uniform(rng, lo, hi)),
            ))
        }
        DataType::Decimal128(p, s) => {
            let limit = 10f64.powi((*p as i32) - (*s as i32)) - 10f64.powi(-(*s as i32));
            let (lo, hi) = (
                spec.min.unwrap_or(-limit).max(-limit),
                spec.max.unwrap_or(limit).min(limit),
            );
            let scale = 10f64.powi(*s as i32);
            Arc::new(
                Decimal128Array::from_iter_values(
                    (0..n).map(|_| (uniform(rng, lo, hi) * scale).round() as i128),
                )
                .with_precision_and_scale(*p, *s)?,
            )
        }
        DataType::Utf8 => {
            let len = spec.length.unwrap_or(100);
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|_| Alphanumeric.sample_string(rng, len)),
            ))
        }
        DataType::Binary => {
            let len = spec.length.unwrap_or(100);
            Arc::new(BinaryArray::from_iter_values((0..n).map(|_| {
                (0..len).map(|_| rng.random::<u8>()).collect::<Vec<u8>>()
            })))
        }
        DataType::Date32 => Arc::new(Date32Array::from_iter_values(
            (0..n).map(|_| (instant_ms(rng).div_euclid(86_400_000)) as i32),
        )),
        DataType::Time32(TimeUnit::Millisecond) => {
            Arc::new(Time32MillisecondArray::from_iter_values(
                (0..n).map(|_| rng.random_range(0..86_400_000)),
            ))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            Arc::new(Time64MicrosecondArray::from_iter_values(
                (0..n).map(|_| rng.random_range(0..86_400_000_000)),
            ))
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            Arc::new(Time64NanosecondArray::from_iter_values(
                (0..n).map(|_| rng.random_range(0..86_400_000_000_000)),
            ))
        }
        DataType::Timestamp(unit, tz) => {
            let vals: Vec<i64> = (0..n)
                .map(|_| {
                    let ms = instant_ms(rng);
                    match unit {
                        TimeUnit::Second => ms / 1000,
                        TimeUnit::Millisecond => ms,
                        TimeUnit::Microsecond => ms * 1000,
                        TimeUnit::Nanosecond => ms * 1_000_000,
                    }
                })
                .collect();
            let arr: ArrayRef = match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(vals).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Millisecond => {
                    Arc::new(TimestampMillisecondArray::from(vals).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Microsecond => {
                    Arc::new(TimestampMicrosecondArray::from(vals).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Nanosecond => {
                    Arc::new(TimestampNanosecondArray::from(vals).with_timezone_opt(tz.clone()))
                }
            };
            arr
        }
        DataType::List(field) => {
            let len = spec.length.unwrap_or(3);
            let child = random(field.data_type(), &FieldSpec::default(), n * len, rng)?;
            Arc::new(ListArray::try_new(
                field.clone(),
                OffsetBuffer::from_lengths(std::iter::repeat_n(len, n)),
                child,
                None,
            )?)
        }
        DataType::Map(entries, sorted) => {
            let len = spec.length.unwrap_or(3);
            let DataType::Struct(kv) = entries.data_type() else {
                bail!("map entries must be a struct")
            };
            let keys = random(kv[0].data_type(), &FieldSpec::default(), n * len, rng)?;
            let values = random(kv[1].data_type(), &FieldSpec::default(), n * len, rng)?;
            let st = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
            Arc::new(MapArray::try_new(
                entries.clone(),
                OffsetBuffer::from_lengths(std::iter::repeat_n(len, n)),
                st,
                None,
                *sorted,
            )?)
        }
        DataType::Struct(fields) => {
            let children = fields
                .iter()
                .map(|f| random(f.data_type(), &FieldSpec::default(), n, rng))
                .collect::<Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new(fields.clone(), children, None)?)
        }
        other => bail!("datagen cannot generate {other}"),
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::sql::{FlinkType, RowField, TypeKind};

    #[test]
    fn every_type_and_sequences() {
        let t = |k| FlinkType::new(k);
        let types = vec![
            t(TypeKind::Boolean),
            t(TypeKind::TinyInt),
            t(TypeKind::SmallInt),
            t(TypeKind::Int),
            t(TypeKind::BigInt),
            t(TypeKind::Float),
            t(TypeKind::Double),
            t(TypeKind::Decimal(10, 2)),
            t(TypeKind::String),
            t(TypeKind::Varchar(5)),
            t(TypeKind::Char(3)),
            t(TypeKind::Bytes),
            t(TypeKind::Binary(4)),
            t(TypeKind::Date),
            t(TypeKind::Time(0)),
            t(TypeKind::Time(6)),
            t(TypeKind::Timestamp(3)),
            t(TypeKind::Timestamp(9)),
            t(TypeKind::TimestampLtz(3)),
            t(TypeKind::Array(Box::new(t(TypeKind::Int)))),
            t(TypeKind::Map(
                Box::new(t(TypeKind::String)),
                Box::new(t(TypeKind::Array(Box::new(t(TypeKind::Double))))),
            )),
            t(TypeKind::Row(vec![
                RowField {
                    name: "x".into(),
                    ty: t(TypeKind::Int),
                    description: None,
                },
                RowField {
                    name: "y".into(),
                    ty: t(TypeKind::Timestamp(3)),
                    description: None,
                },
            ])),
        ];
        let schema = Arc::new(Schema::new(
            types
                .iter()
                .enumerate()
                .map(|(i, ty)| ty.to_field(&format!("c{i}")))
                .collect::<Vec<_>>(),
        ));
        let specs: Vec<FieldSpec> = types
            .iter()
            .map(|_| FieldSpec {
                null_rate: 0.5,
                ..Default::default()
            })
            .collect();
        let mut rng = SmallRng::seed_from_u64(1);
        let b = batch(&schema, &specs, 0, 50, &mut rng).unwrap();
        assert_eq!(b.num_rows(), 50);
        assert!(b.column(3).null_count() > 0);

        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let seq = FieldSpec {
            kind: Kind::Sequence {
                start: 10,
                end: 100,
            },
            ..Default::default()
        };
        let specs = vec![
            seq.clone(),
            FieldSpec {
                kind: Kind::Sequence { start: 0, end: 5 },
                ..Default::default()
            },
        ];
        let b = batch(&schema, &specs, 3, 2, &mut rng).unwrap();
        assert_eq!(
            b.column(0).as_primitive::<Int64Type>().values().to_vec(),
            vec![13, 14]
        );
        assert_eq!(b.column(1).as_string::<i32>().value(1), "4");
        let bounded = FieldSpec {
            min: Some(5.0),
            max: Some(7.0),
            ..Default::default()
        };
        let b = batch(
            &Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)])),
            &[bounded],
            0,
            200,
            &mut rng,
        )
        .unwrap();
        assert!(
            b.column(0)
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .all(|v| (5..=7).contains(v))
        );
    }
}
