//! The names of the columns a SELECT produces, as Flink (Calcite's `SqlToRelConverter.deriveAlias`) gives them:
//! an item `expr AS x` is `x`, a column reference `a` or `t.a` (or a field `r.x`) is its last name, anything else
//! is `EXPR$<i>` with `i` its position in the select list after `*` is expanded; a name already taken earlier in
//! the list gets the first free suffix `0`, `1`, ... (`SELECT a, a` is `a, a0`; `SELECT id + 1, id + 1` is
//! `EXPR$0, EXPR$1`). DataFusion refuses duplicate names and names expressions after their text, so the query's
//! syntax tree gets these names as explicit aliases before it is planned; every SELECT of the query is named
//! (derived tables and CTEs first, so an outer query can refer to `EXPR$0` as it can in Flink).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use datafusion::common::TableReference;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    self, Cte, Expr, FunctionArguments, Ident, Query, Select, SelectItem, SetExpr, TableFactor,
    TableWithJoins, With,
};

/// Parses and plans a query (an INSERT's SELECT / VALUES) with Flink's column names.
pub async fn plan_query(state: &SessionState, sql: &str) -> Result<LogicalPlan> {
    let dialect = state.config_options().sql_parser.dialect;
    let mut statement = state.sql_to_statement(sql, &dialect)?;
    if let DFStatement::Statement(s) = &mut statement
        && let ast::Statement::Query(q) = s.as_mut()
    {
        name_query(state, q, &mut Vec::new()).await;
    }
    state.statement_to_plan(statement).await
}

type Naming<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Names every SELECT of `query`; `scope` holds the CTEs visible here (for planning wildcard expansions).
fn name_query<'a>(
    state: &'a SessionState,
    query: &'a mut Query,
    scope: &'a mut Vec<Cte>,
) -> Naming<'a> {
    Box::pin(async move {
        let outer = scope.len();
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                name_query(state, &mut cte.query, scope).await;
                scope.push(cte.clone());
            }
        }
        name_body(state, &mut query.body, scope).await;
        scope.truncate(outer);
    })
}

fn name_body<'a>(
    state: &'a SessionState,
    body: &'a mut SetExpr,
    scope: &'a mut Vec<Cte>,
) -> Naming<'a> {
    Box::pin(async move {
        match body {
            SetExpr::Select(select) => {
                for from in &mut select.from {
                    name_from(state, from, scope).await;
                }
                name_select(state, select, scope).await;
            }
            SetExpr::Query(q) => name_query(state, q, scope).await,
            SetExpr::SetOperation { left, right, .. } => {
                name_body(state, left, scope).await;
                name_body(state, right, scope).await;
            }
            _ => {}
        }
    })
}

fn name_from<'a>(
    state: &'a SessionState,
    from: &'a mut TableWithJoins,
    scope: &'a mut Vec<Cte>,
) -> Naming<'a> {
    Box::pin(async move {
        let relations = std::iter::once(&mut from.relation)
            .chain(from.joins.iter_mut().map(|j| &mut j.relation));
        for relation in relations {
            match relation {
                TableFactor::Derived { subquery, .. } => name_query(state, subquery, scope).await,
                TableFactor::NestedJoin {
                    table_with_joins, ..
                } => name_from(state, table_with_joins, scope).await,
                _ => {}
            }
        }
    })
}

/// Gives every item of the select list its Flink name (an alias where DataFusion's own name would differ).
async fn name_select(state: &SessionState, select: &mut Select, scope: &[Cte]) {
    let items = &select.projection;
    if items
        .iter()
        .any(|i| matches!(i, SelectItem::ExprWithAliases { .. }))
        || (items.len() == 1 && is_wildcard(&items[0]))
    {
        // Not Flink syntax / a lone `*`: the input's names, unique already.
        return;
    }
    let relations = relation_names(&select.from);
    // The select list with `*` expanded: each item with the name DataFusion gives it and the name Calcite
    // derives from it (`None`: `EXPR$<i>`).
    let mut expanded: Vec<(SelectItem, Option<String>, Option<String>)> = Vec::new();
    for item in items {
        if !is_wildcard(item) {
            expanded.push((
                item.clone(),
                datafusion_name(item, &relations),
                calcite_name(item),
            ));
            continue;
        }
        let Some(columns) = expand_wildcard(state, select, item, scope).await else {
            // Planning it fails: leave the query as it is for the planner to report the error.
            return;
        };
        for (qualifier, name) in columns {
            expanded.push((
                SelectItem::UnnamedExpr(column(qualifier, &name)),
                Some(name.clone()),
                Some(name),
            ));
        }
    }
    let mut used = BTreeSet::new();
    let mut projection = Vec::with_capacity(expanded.len());
    for (i, (item, natural, derived)) in expanded.into_iter().enumerate() {
        let name = unique(derived.unwrap_or_else(|| format!("EXPR${i}")), &mut used);
        projection.push(if natural.as_deref() == Some(name.as_str()) {
            item
        } else {
            aliased(item, name)
        });
    }
    select.projection = projection;
}

fn is_wildcard(item: &SelectItem) -> bool {
    matches!(
        item,
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
    )
}

/// `name`, or `name0`, `name1`, ... if it is taken.
fn unique(name: String, used: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut j = 0;
    while used.contains(&candidate) {
        candidate = format!("{name}{j}");
        j += 1;
    }
    used.insert(candidate.clone());
    candidate
}

/// The name Calcite derives from a select item: its alias, or the last part of an identifier (a niladic
/// function such as `CURRENT_TIMESTAMP` is an identifier there); `None` for any other expression.
fn calcite_name(item: &SelectItem) -> Option<String> {
    fn of(e: &Expr) -> Option<String> {
        match e {
            Expr::Identifier(i) => Some(i.value.clone()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.clone()),
            Expr::Nested(inner) => of(inner),
            Expr::Function(f) if matches!(f.args, FunctionArguments::None) => f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone()),
            _ => None,
        }
    }
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        SelectItem::UnnamedExpr(e) => of(e),
        _ => None,
    }
}

/// The name DataFusion gives a select item when it has none of its own: a column keeps its name (`t.a` is a
/// column of relation `t` when `t` is in FROM; otherwise it is a field access DataFusion names `t[a]`).
fn datafusion_name(item: &SelectItem, relations: &[String]) -> Option<String> {
    fn of(e: &Expr, relations: &[String]) -> Option<String> {
        match e {
            Expr::Identifier(i) => Some(i.value.clone()),
            Expr::CompoundIdentifier(parts)
                if parts.len() >= 2 && relations.contains(&parts[parts.len() - 2].value) =>
            {
                parts.last().map(|i| i.value.clone())
            }
            Expr::Nested(inner) => of(inner, relations),
            _ => None,
        }
    }
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
        SelectItem::UnnamedExpr(e) => of(e, relations),
        _ => None,
    }
}

/// The names by which FROM's relations qualify their columns (alias, or the table's last name part).
fn relation_names(from: &[TableWithJoins]) -> Vec<String> {
    fn add(relation: &TableFactor, out: &mut Vec<String>) {
        match relation {
            TableFactor::Table { alias: Some(a), .. }
            | TableFactor::Derived { alias: Some(a), .. }
            | TableFactor::NestedJoin { alias: Some(a), .. } => out.push(a.name.value.clone()),
            TableFactor::Table { name, .. } => {
                if let Some(i) = name.0.last().and_then(|p| p.as_ident()) {
                    out.push(i.value.clone());
                }
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => walk(table_with_joins, out),
            _ => {}
        }
    }
    fn walk(from: &TableWithJoins, out: &mut Vec<String>) {
        add(&from.relation, out);
        for j in &from.joins {
            add(&j.relation, out);
        }
    }
    let mut out = Vec::new();
    for f in from {
        walk(f, &mut out);
    }
    out
}

/// The columns a `*` / `t.*` item stands for: the output of `SELECT <item> FROM <the same FROM>` planned in the
/// same CTE scope. `None` if that cannot be planned.
async fn expand_wildcard(
    state: &SessionState,
    select: &Select,
    item: &SelectItem,
    scope: &[Cte],
) -> Option<Vec<(Option<TableReference>, String)>> {
    let mut probe = select.clone();
    probe.projection = vec![item.clone()];
    let query = Query {
        with: (!scope.is_empty()).then(|| With {
            with_token: AttachedToken::empty(),
            recursive: false,
            cte_tables: scope.to_vec(),
        }),
        body: Box::new(SetExpr::Select(Box::new(probe))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: vec![],
    };
    let statement = DFStatement::Statement(Box::new(ast::Statement::Query(Box::new(query))));
    let plan = state.statement_to_plan(statement).await.ok()?;
    Some(
        plan.schema()
            .iter()
            .map(|(q, f)| (q.cloned(), f.name().clone()))
            .collect(),
    )
}

/// A reference to a column of the input: `qualifier.name`.
fn column(qualifier: Option<TableReference>, name: &str) -> Expr {
    let quoted = |s: String| Ident::with_quote('"', s);
    match qualifier {
        Some(q) => Expr::CompoundIdentifier(
            q.to_vec()
                .into_iter()
                .chain([name.to_string()])
                .map(quoted)
                .collect(),
        ),
        None => Expr::Identifier(quoted(name.to_string())),
    }
}

fn aliased(item: SelectItem, name: String) -> SelectItem {
    let expr = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        other => return other,
    };
    SelectItem::ExprWithAlias {
        expr,
        alias: Ident::new(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_take_the_first_free_suffix() {
        let mut used = BTreeSet::new();
        let names: Vec<String> = ["a", "a", "EXPR$2", "a0", "EXPR$2"]
            .into_iter()
            .map(|n| unique(n.to_string(), &mut used))
            .collect();
        assert_eq!(names, ["a", "a0", "EXPR$2", "a00", "EXPR$20"]);
    }
}
