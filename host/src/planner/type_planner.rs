//! Resolves the `FLINK_TYPE('<Flink type>')` type names that [`crate::sql::translate`] writes for the target type
//! of every `CAST` / `TRY_CAST`: through the Flink type grammar of DDL ([`crate::sql::parse_type`]) to the Arrow
//! type that a column of that type has ([`crate::sql::FlinkType::to_arrow`]). So `CAST(x AS MAP<STRING, INT>)`
//! produces the type of a `MAP<STRING, INT>` sink column, and `TIMESTAMP(3)` the millisecond timestamp of DDL.

use std::sync::Arc;

use arrow::datatypes::{Field, FieldRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast;

use crate::sql::parse_type;
use crate::sql::translate::TYPE_REFERENCE;

#[derive(Debug)]
pub struct FlinkTypePlanner;

impl TypePlanner for FlinkTypePlanner {
    fn plan_type_field(&self, sql_type: &ast::DataType) -> Result<Option<FieldRef>> {
        let ast::DataType::Custom(name, modifiers) = sql_type else {
            return Ok(None);
        };
        let is_reference = matches!(name.0.as_slice(), [part] if part
            .as_ident()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(TYPE_REFERENCE)));
        if !is_reference {
            return Ok(None);
        }
        let [text] = modifiers.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{TYPE_REFERENCE}(...) takes one Flink data type in quotes, found {} argument(s)",
                modifiers.len()
            )));
        };
        let ty = parse_type(text)
            .map_err(|e| DataFusionError::Plan(format!("data type {text}: {}", e.message)))?;
        // Unnamed and nullable: a cast of the value's type only; nullability follows the value cast.
        Ok(Some(Arc::new(Field::new("", ty.to_arrow(), true))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, TimeUnit};

    fn plan(text: &str) -> Result<Option<FieldRef>> {
        FlinkTypePlanner.plan_type_field(&ast::DataType::Custom(
            ast::ObjectName::from(vec![ast::Ident::new(TYPE_REFERENCE)]),
            vec![text.to_string()],
        ))
    }

    #[test]
    fn resolves_flink_types_and_leaves_others() {
        let f = plan("TIMESTAMP(3) WITH LOCAL TIME ZONE").unwrap().unwrap();
        assert_eq!(
            f.data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
        );
        assert!(f.is_nullable() && f.name().is_empty());
        let e = plan("MAP<STRING>").unwrap_err().to_string();
        assert!(e.contains("MAP<STRING>") && e.contains("','"), "{e}");
        assert!(
            FlinkTypePlanner
                .plan_type_field(&ast::DataType::Int(None))
                .unwrap()
                .is_none()
        );
    }
}
