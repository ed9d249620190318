//! One message being decoded: its Jackson tree ([`Doc`]) and the rows it emits (physical values through
//! the json format's tree decoder, then the metadata values, then the row kind).

use format_common::{Cols, RowKind, RowType};
use json_codec::{Decoder as JsonDecoder, TreeRow};

use crate::rows::Rows;
use crate::{Doc, Kind, MetaValue, Span, Stop};

/// What a row field of the envelope holds, as Flink's converted envelope sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowState {
    /// Missing, JSON null, or (with `ignore-parse-errors`) not an object: Flink's `null` row.
    Null,
    Object(Span),
}

/// A message being decoded, handed to [`crate::Envelope::rows`].
pub struct Message<'d, 'r> {
    doc: Doc<'d>,
    pub(crate) json: &'r JsonDecoder,
    pub(crate) rows: &'r mut Rows,
    /// The output row type (for scratch columns).
    pub(crate) rt: &'r RowType,
    /// Columns for converting what is not emitted (Flink converts the whole envelope).
    pub(crate) scratch: &'r mut Option<Cols>,
    pub(crate) physical: usize,
    /// The metadata values of this message's rows.
    pub(crate) meta: Vec<MetaValue>,
    names: &'r [String],
    /// The metadata keys asked for, in order.
    keys: &'r [&'static str],
    /// [`Message::emit_merged`]'s fields from `old` and from `data` (the same for every row).
    split: Option<(Vec<usize>, Vec<usize>)>,
}

fn corrupt(e: String) -> Stop {
    Stop::Corrupt(e)
}

impl<'d, 'r> Message<'d, 'r> {
    pub(crate) fn new(
        doc: Doc<'d>,
        json: &'r JsonDecoder,
        rows: &'r mut Rows,
        rt: &'r RowType,
        scratch: &'r mut Option<Cols>,
        names: &'r [String],
        keys: &'r [&'static str],
    ) -> Message<'d, 'r> {
        Message {
            doc,
            json,
            rows,
            rt,
            scratch,
            physical: names.len(),
            meta: Vec::new(),
            names,
            keys,
            split: None,
        }
    }

    /// The message's tree.
    pub fn doc(&self) -> &Doc<'d> {
        &self.doc
    }

    pub fn ignore_parse_errors(&self) -> bool {
        self.json.options().ignore_parse_errors
    }

    /// The names of the row type's fields.
    pub fn field_names(&self) -> &[String] {
        self.names
    }

    /// Jackson's `get(name)` on object `v` (the root, a payload): the field's last value.
    pub fn get(&self, v: &Span, name: &str) -> Result<Option<Span>, Stop> {
        self.doc.get(v, name).map_err(corrupt)
    }

    /// Jackson's `get(name)` on object `v` of each of `names`, in one pass over `v`.
    pub fn get_all<const N: usize>(
        &self,
        v: &Span,
        names: [&str; N],
    ) -> Result<[Option<Span>; N], Stop> {
        let mut found = [const { None }; N];
        self.doc
            .fields(v, |k, s| {
                if let Some(i) = names.iter().position(|n| n.as_bytes() == k) {
                    found[i] = Some(s);
                }
            })
            .map_err(corrupt)?;
        Ok(found)
    }

    /// Fails unless the message is a JSON object (Flink casts its tree to `ObjectNode` and reads it).
    pub fn check_root_object(&self) -> Result<(), Stop> {
        if self.doc.kind(&self.doc.root()) == Kind::Object {
            return Ok(());
        }
        Err(Stop::Corrupt(
            "the message is not a JSON object (ClassCastException, NullPointerException)".into(),
        ))
    }

    /// Flink's STRING of field value `v` (`None`: missing or JSON null).
    pub fn string(&self, v: Option<&Span>) -> Result<Option<String>, Stop> {
        let Some(v) = v else {
            return Ok(None);
        };
        let mut out = Vec::new();
        let present = self
            .doc
            .string(v, self.json.big_decimal(), &mut out)
            .map_err(corrupt)?;
        Ok(present.then(|| String::from_utf8_lossy(&out).into_owned()))
    }

    /// Jackson's `asText()` of `v` (`null` for JSON null, `""` for a container).
    pub fn as_text(&self, v: &Span) -> Result<String, Stop> {
        let mut out = Vec::new();
        self.doc
            .as_text(v, self.json.big_decimal(), &mut out)
            .map_err(corrupt)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The value at `v` as a BIGINT (`None`: missing, JSON null, or failed with ignore-parse-errors).
    pub fn long(&self, v: Option<&Span>) -> Result<Option<i64>, Stop> {
        match v {
            None => Ok(None),
            Some(v) => self.json.tree_long(&self.doc, v).map_err(corrupt),
        }
    }

    /// A TIMESTAMP_LTZ(3) metadata value from the BIGINT at `v` counting units of `millis_per_unit`
    /// milliseconds (Java's `long` multiplication wraps); NULL where [`Message::long`] gives `None`.
    pub fn timestamp(&self, v: Option<&Span>, millis_per_unit: i64) -> Result<MetaValue, Stop> {
        Ok(self.long(v)?.map_or(MetaValue::Null, |t| {
            MetaValue::Millis(t.wrapping_mul(millis_per_unit))
        }))
    }

    /// What the row field `field` (value `v`) holds. A value that is neither an object nor null fails
    /// the message (Flink's `ClassCastException`) unless ignore-parse-errors makes it null.
    pub fn row(&self, field: &str, v: Option<&Span>) -> Result<RowState, Stop> {
        let Some(v) = v else {
            return Ok(RowState::Null);
        };
        match self.doc.kind(v) {
            Kind::Object => Ok(RowState::Object(v.clone())),
            Kind::Null => Ok(RowState::Null),
            _ if self.ignore_parse_errors() => Ok(RowState::Null),
            _ => Err(Stop::Corrupt(format!(
                "Fail to deserialize at field: {field}: not a JSON object (ClassCastException)"
            ))),
        }
    }

    /// The elements of array field `field` (value `v`): `None` for Flink's null array (missing, JSON
    /// null, or with ignore-parse-errors not an array).
    pub fn array(&self, field: &str, v: Option<&Span>) -> Result<Option<Vec<Span>>, Stop> {
        let Some(v) = v else {
            return Ok(None);
        };
        match self.doc.kind(v) {
            Kind::Array => {
                let mut out = Vec::new();
                self.doc.elements(v, |e| out.push(e)).map_err(corrupt)?;
                Ok(Some(out))
            }
            Kind::Null => Ok(None),
            _ if self.ignore_parse_errors() => Ok(None),
            _ => Err(Stop::Corrupt(format!(
                "Fail to deserialize at field: {field}: not a JSON array (ClassCastException)"
            ))),
        }
    }

    /// Jackson's `findValue(name) != null` on `v`.
    pub fn find_value(&self, v: &Span, name: &str) -> Result<bool, Stop> {
        self.doc.find_value(v, name).map_err(corrupt)
    }

    /// Sets the metadata values of the rows this message emits: `value` of each key asked for, in
    /// order (the first error stops).
    pub fn set_metadata(
        &mut self,
        value: impl Fn(&Self, &str) -> Result<MetaValue, Stop>,
    ) -> Result<(), Stop> {
        self.meta = self
            .keys
            .iter()
            .map(|key| value(self, key))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Converts row `v` without emitting it, as Flink converts every row of the envelope: a conversion
    /// error fails the message (with ignore-parse-errors nothing can fail).
    pub fn check(&mut self, v: &RowState) -> Result<(), Stop> {
        let RowState::Object(v) = v else {
            return Ok(());
        };
        if self.ignore_parse_errors() {
            return Ok(());
        }
        let cols = self.scratch.get_or_insert_with(|| Cols::new(self.rt));
        let r = self.json.tree_row(&self.doc, v, None, cols);
        cols.rollback();
        r.map(|_| ()).map_err(corrupt)
    }

    /// Emits row `v` with `kind`. A null row is the caller's to refuse (Flink's NPE), so it is an error
    /// here too.
    pub fn emit(&mut self, v: &RowState, kind: RowKind) -> Result<(), Stop> {
        let RowState::Object(v) = v else {
            return Err(Stop::npe("the row to emit"));
        };
        let written = self
            .json
            .tree_row(&self.doc, v, None, &mut self.rows.cols)
            .map_err(corrupt)?;
        self.finish_row(written, kind)
    }

    /// Emits the row Flink builds for an update's before image from `old` and `data` (canal, maxwell):
    /// a field named anywhere in `old_all` (the whole `old` value: Jackson's `findValue`, which also
    /// sees the other elements of canal's `old` list) is `old`'s, any other is copied from `data`.
    /// Either row being null is Flink's NPE.
    pub fn emit_merged(
        &mut self,
        old_all: &Span,
        old: &RowState,
        data: &RowState,
        kind: RowKind,
    ) -> Result<(), Stop> {
        let (RowState::Object(old), RowState::Object(data)) = (old, data) else {
            return Err(Stop::npe("the old or new row of an update"));
        };
        if self.split.is_none() {
            let mut from_old = Vec::new();
            let mut from_data = Vec::new();
            for (k, name) in self.names.iter().enumerate() {
                if self.find_value(old_all, name)? {
                    from_old.push(k);
                } else {
                    from_data.push(k);
                }
            }
            self.split = Some((from_old, from_data));
        }
        let Some((from_old, from_data)) = &self.split else {
            return Ok(());
        };
        let a = self
            .json
            .tree_row(&self.doc, old, Some(from_old), &mut self.rows.cols)
            .map_err(corrupt)?;
        let b = self
            .json
            .tree_row(&self.doc, data, Some(from_data), &mut self.rows.cols)
            .map_err(corrupt)?;
        let written = match (a, b) {
            (TreeRow::Row { null_in: x }, TreeRow::Row { null_in: y }) => {
                TreeRow::Row { null_in: x.or(y) }
            }
            _ => TreeRow::Null,
        };
        self.finish_row(written, kind)
    }

    /// After a row's values: checks NOT NULL, writes the metadata, completes the row.
    fn finish_row(&mut self, written: TreeRow, kind: RowKind) -> Result<(), Stop> {
        match written {
            TreeRow::Null => {
                return Err(Stop::npe("the row to emit"));
            }
            TreeRow::Row { null_in: Some(f) } => {
                return Err(Stop::NotNull(format!(
                    "NULL in NOT NULL field `{f}` ({}): Flink passes the row on, a batch cannot hold it",
                    kind_name(kind)
                )));
            }
            TreeRow::Row { null_in: None } => {}
        }
        for (m, value) in self.meta.iter().enumerate() {
            let c = self.physical + m;
            let cols = &mut self.rows.cols;
            match value {
                MetaValue::Null => cols.push_null(c),
                MetaValue::Millis(v) => cols.push_i64(c, *v),
                MetaValue::Json(v) => self
                    .json
                    .tree_column(&self.doc, v, c, cols)
                    .map_err(corrupt)?,
            }
        }
        self.rows.complete(kind);
        Ok(())
    }

    /// Converts the metadata values without emitting a row (a message with no row still has its
    /// envelope converted by Flink).
    pub(crate) fn check_metadata(&mut self) -> Result<(), Stop> {
        if self.ignore_parse_errors() {
            return Ok(());
        }
        let cols = self.scratch.get_or_insert_with(|| Cols::new(self.rt));
        let mut r = Ok(());
        for (m, value) in self.meta.iter().enumerate() {
            if let MetaValue::Json(v) = value {
                r = r.and(self.json.tree_column(&self.doc, v, self.physical + m, cols));
            }
        }
        for c in 0..self.rt.fields.len() {
            cols.truncate(c, 0);
        }
        r.map_err(corrupt)
    }
}

/// Flink's short name of a row kind (`RowKind.shortString()`).
pub(crate) fn kind_name(kind: RowKind) -> &'static str {
    match kind {
        RowKind::Insert => "+I",
        RowKind::UpdateBefore => "-U",
        RowKind::UpdateAfter => "+U",
        RowKind::Delete => "-D",
    }
}
