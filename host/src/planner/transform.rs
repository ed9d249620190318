//! Per-batch evaluation of a planned INSERT: DataFusion physical expressions for filters and projections, then
//! the mapping onto the sink's columns.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use arrow::array::{Array, ArrayRef, BooleanArray, UInt8Array, new_null_array};
use arrow::compute::{CastOptions, cast_with_options, filter_record_batch};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::DFSchema;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{LogicalPlan, TableScan};
use datafusion::physical_expr::PhysicalExpr;

use crate::connector_api::changelog;

/// One step of a pipeline's transform.
pub enum Stage {
    /// Keep the columns at these indices (a scan's projection).
    Columns(Vec<usize>, SchemaRef),
    Filter(Arc<dyn PhysicalExpr>),
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
}

/// What runs on every batch between a source and a sink.
pub struct Transform {
    pub stages: Vec<Stage>,
    pub sink_schema: SchemaRef,
    /// For each sink column, the query column that feeds it (`None`: NULL).
    pub mapping: Vec<Option<usize>>,
    pub drop_null_violations: bool,
    pub sink_name: String,
}

/// Flink-like implicit cast rule for INSERT: same type family (numbers, strings, binary, booleans, date/time),
/// nested types recursively; NULL goes anywhere.
pub fn compatible(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || *from == Null {
        return true;
    }
    let family = |t: &DataType| -> u8 {
        match t {
            t if t.is_numeric() => 1,
            Utf8 | LargeUtf8 | Utf8View => 2,
            Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => 3,
            Boolean => 4,
            Date32 | Date64 => 5,
            Timestamp(_, _) => 6,
            Time32(_) | Time64(_) => 7,
            _ => 0,
        }
    };
    match (from, to) {
        (List(a) | LargeList(a) | FixedSizeList(a, _), List(b)) => {
            compatible(a.data_type(), b.data_type())
        }
        (Map(a, _), Map(b, _)) => compatible(a.data_type(), b.data_type()),
        (Struct(a), Struct(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| compatible(x.data_type(), y.data_type()))
        }
        _ => {
            let (f, t) = (family(from), family(to));
            f != 0 && f == t && arrow::compute::can_cast_types(from, to)
        }
    }
}

impl Transform {
    /// Batches already in the sink schema pass through.
    pub fn identity(sink_schema: SchemaRef) -> Self {
        let mapping = (0..sink_schema.fields().len()).map(Some).collect();
        Transform {
            stages: Vec::new(),
            sink_schema,
            mapping,
            drop_null_violations: false,
            sink_name: String::new(),
        }
    }

    pub fn build(
        state: &SessionState,
        scan: Option<&TableScan>,
        chain: &[&LogicalPlan],
        sink_schema: SchemaRef,
        mapping: Vec<Option<usize>>,
        drop_null_violations: bool,
        sink_name: &str,
    ) -> Result<Self> {
        let mut stages = Vec::new();
        if let Some(ts) = scan {
            let full: DFSchema =
                DFSchema::try_from_qualified_schema(ts.table_name.clone(), &ts.source.schema())?;
            for f in &ts.filters {
                stages.push(Stage::Filter(state.create_physical_expr(f.clone(), &full)?));
            }
            if let Some(p) = &ts.projection {
                stages.push(Stage::Columns(
                    p.clone(),
                    Arc::new(ts.projected_schema.as_arrow().clone()),
                ));
            }
        }
        for node in chain {
            match node {
                LogicalPlan::Filter(f) => stages.push(Stage::Filter(
                    state.create_physical_expr(f.predicate.clone(), f.input.schema())?,
                )),
                LogicalPlan::Projection(p) => {
                    let exprs = p
                        .expr
                        .iter()
                        .map(|e| state.create_physical_expr(e.clone(), p.input.schema()))
                        .collect::<datafusion::error::Result<Vec<_>>>()?;
                    stages.push(Stage::Project(exprs, Arc::new(p.schema.as_arrow().clone())));
                }
                _ => {}
            }
        }
        Ok(Transform {
            stages,
            sink_schema,
            mapping,
            drop_null_violations,
            sink_name: sink_name.to_string(),
        })
    }

    /// Runs the stages and the sink mapping on one batch. Returns the sink batch and the number of rows dropped
    /// by the NOT NULL enforcer. Row kinds (ADR 0016) go along: filtered with their rows, attached to the
    /// sink batch.
    pub fn apply(&self, batch: RecordBatch) -> Result<(RecordBatch, usize)> {
        let (mut b, mut kinds) = changelog::split(batch)?;
        for stage in &self.stages {
            b = match stage {
                Stage::Columns(idx, schema) => RecordBatch::try_new_with_options(
                    schema.clone(),
                    idx.iter().map(|i| b.column(*i).clone()).collect(),
                    &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                )?,
                Stage::Filter(pred) => {
                    let v = pred.evaluate(&b)?.into_array(b.num_rows())?;
                    let mask = v
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| anyhow!("filter predicate is not boolean"))?;
                    kinds = changelog::filter_kinds(kinds, mask)?;
                    filter_record_batch(&b, mask)?
                }
                Stage::Project(exprs, schema) => {
                    let cols = exprs
                        .iter()
                        .map(|e| e.evaluate(&b).and_then(|v| v.into_array(b.num_rows())))
                        .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
                    // DataFusion's inferred nullability can be stricter than the data; keep our own schema lax.
                    let schema = Arc::new(Schema::new(
                        schema
                            .fields()
                            .iter()
                            .zip(&cols)
                            .map(|(f, c)| {
                                f.as_ref()
                                    .clone()
                                    .with_data_type(c.data_type().clone())
                                    .with_nullable(true)
                            })
                            .collect::<Vec<_>>(),
                    ));
                    RecordBatch::try_new_with_options(
                        schema,
                        cols,
                        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                    )?
                }
            };
        }
        self.finish(b, kinds)
    }

    /// Maps query columns onto the sink columns: casts, NULLs for unlisted columns, NOT NULL enforcement;
    /// then attaches the kinds of the rows kept.
    pub fn finish(
        &self,
        b: RecordBatch,
        kinds: Option<UInt8Array>,
    ) -> Result<(RecordBatch, usize)> {
        let n = b.num_rows();
        let opts = CastOptions {
            safe: false,
            ..Default::default()
        };
        let mut cols = Vec::with_capacity(self.mapping.len());
        for (si, m) in self.mapping.iter().enumerate() {
            let field = self.sink_schema.field(si);
            let col = match m {
                Some(qi) => {
                    let c = b.column(*qi);
                    if c.data_type() == field.data_type() {
                        c.clone()
                    } else {
                        cast_with_options(c, field.data_type(), &opts).map_err(|e| {
                            anyhow!(
                                "column '{}': cannot cast {} to {}: {e}",
                                field.name(),
                                c.data_type(),
                                field.data_type()
                            )
                        })?
                    }
                }
                None => new_null_array(field.data_type(), n),
            };
            cols.push(col);
        }
        let mut skipped = 0;
        let violating: Vec<usize> = self
            .sink_schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, f)| !f.is_nullable() && cols[*i].null_count() > 0)
            .map(|(i, _)| i)
            .collect();
        if !violating.is_empty() {
            if !self.drop_null_violations {
                let f = self.sink_schema.field(violating[0]);
                return Err(anyhow!(
                    "column '{}' of table '{}' is NOT NULL, however, a null value is being written into it; set 'table.exec.sink.not-null-enforcer' = 'DROP' to drop such rows instead",
                    f.name(),
                    self.sink_name
                ));
            }
            let keep = BooleanArray::from(
                (0..n)
                    .map(|r| violating.iter().all(|i| cols[*i].is_valid(r)))
                    .collect::<Vec<bool>>(),
            );
            skipped = keep.false_count();
            let lax = Arc::new(Schema::new(
                self.sink_schema
                    .fields()
                    .iter()
                    .map(|f| f.as_ref().clone().with_nullable(true))
                    .collect::<Vec<_>>(),
            ));
            let tmp = filter_record_batch(
                &RecordBatch::try_new_with_options(
                    lax,
                    cols,
                    &RecordBatchOptions::new().with_row_count(Some(n)),
                )?,
                &keep,
            )?;
            let rows = tmp.num_rows();
            let kept = RecordBatch::try_new_with_options(
                self.sink_schema.clone(),
                tmp.columns().to_vec(),
                &RecordBatchOptions::new().with_row_count(Some(rows)),
            )?;
            let kinds = changelog::filter_kinds(kinds, &keep)?;
            return Ok((changelog::attach(kept, kinds)?, skipped));
        }
        let out = RecordBatch::try_new_with_options(
            self.sink_schema.clone(),
            cols,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        Ok((changelog::attach(out, kinds)?, skipped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector_api::changelog::{RowKind, kind_at, kinds, kinds_array};
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::Field;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
    use datafusion::scalar::ScalarValue;

    #[test]
    fn row_kinds_follow_their_rows_through_filters_projections_and_the_not_null_enforcer() {
        let input = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let projected = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("id", DataType::Int32, true),
        ]));
        let sink = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("id", DataType::Int32, true),
        ]));
        let id_above_1: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            Arc::new(Column::new("id", 0)),
            Operator::Gt,
            Arc::new(Literal::new(ScalarValue::Int32(Some(1)))),
        ));
        let mut t = Transform::identity(sink);
        t.stages = vec![
            Stage::Filter(id_above_1),
            Stage::Columns(vec![1, 0], projected),
        ];
        t.drop_null_violations = true;
        let batch = RecordBatch::try_new(
            input,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    None,
                    Some("d"),
                    Some("e"),
                ])),
            ],
        )
        .unwrap();
        let batch = changelog::attach(
            batch,
            kinds_array(&[
                RowKind::Insert,
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::Delete,
                RowKind::Insert,
            ]),
        )
        .unwrap();
        let (out, dropped) = t.apply(batch).unwrap();
        assert_eq!(dropped, 1, "the NULL name of id 3 is dropped");
        let ids: Vec<i32> = out
            .column(1)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap()
            .values()
            .to_vec();
        assert_eq!(ids, vec![2, 4, 5]);
        let k = kinds(&out);
        assert_eq!(
            (0..3).map(|i| kind_at(k, i)).collect::<Vec<_>>(),
            vec![RowKind::UpdateBefore, RowKind::Delete, RowKind::Insert]
        );
        assert_eq!(out.num_columns(), 3, "name, id and the row kinds");
    }

    #[test]
    fn an_append_only_batch_stays_without_row_kinds() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, true)]));
        let t = Transform::identity(schema.clone());
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(vec![1, 2]))]).unwrap();
        let (out, _) = t.apply(batch.clone()).unwrap();
        assert_eq!(out, batch);
    }
}
