//! OPTIONS hints (`FROM t /*+ OPTIONS('k' = 'v') */`): each hinted table joins the catalog under the hint's
//! name ([`crate::sql::TableHint::key`]) as the table declared with the hint's options merged over its own
//! (a hint's value wins), resolved and checked as one set exactly as a declared table is. Refused when
//! `table.dynamic-table-options.enabled` is `false`.

use std::sync::Arc;

use super::{Catalog, resolve_table};
use crate::connector_api::Registry;
use crate::sql::{Insert, TableHint};

/// Adds the hinted tables of `inserts` to `catalog`; every problem, as printed.
pub fn apply_hints(
    catalog: &mut Catalog,
    inserts: &[&Insert],
    registry: &Registry,
) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    for hint in inserts.iter().flat_map(|i| &i.hints) {
        if catalog.tables.contains_key(&hint.key) {
            continue;
        }
        match hinted_table(catalog, hint, registry) {
            Ok(table) => {
                catalog.order.push(hint.key.clone());
                catalog.tables.insert(hint.key.clone(), Arc::new(table));
            }
            Err(es) => errors.extend(es),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn hinted_table(
    catalog: &Catalog,
    hint: &TableHint,
    registry: &Registry,
) -> Result<crate::connector_api::CatalogTable, Vec<String>> {
    let at = format!("{}: OPTIONS hint on table '{}'", hint.pos, hint.table);
    if !catalog.settings.dynamic_table_options {
        return Err(vec![format!(
            "{at}: hints are disabled ('{}' = 'false'); set the options in the table's WITH clause or enable hints",
            crate::connector_api::settings::DYNAMIC_OPTIONS
        )]);
    }
    let Some(base) = catalog.get(&hint.table) else {
        return Err(vec![format!(
            "{:#}",
            catalog.unknown_table(&hint.table, hint.pos)
        )]);
    };
    let mut def = base.def.clone();
    for (key, value) in &hint.options {
        if key == "connector" {
            return Err(vec![format!(
                "{at}: 'connector' cannot be set by a hint (declare another table)"
            )]);
        }
        match def.options.iter_mut().find(|(k, _, _)| k == key) {
            Some(o) => {
                o.1 = value.clone();
                o.2 = hint.pos;
            }
            None => def.options.push((key.clone(), value.clone(), hint.pos)),
        }
    }
    let within = |e: String| format!("{e} (with the OPTIONS hint at {})", hint.pos);
    let table = resolve_table(&def, registry).map_err(|es| {
        es.iter()
            .map(|e| within(format!("{e:#}")))
            .collect::<Vec<_>>()
    })?;
    table
        .factory
        .validate_settings(&table, &catalog.settings)
        .map_err(|e| {
            vec![within(format!(
                "{}: table '{}': {e:#}",
                def.pos,
                table.name()
            ))]
        })?;
    Ok(table)
}
