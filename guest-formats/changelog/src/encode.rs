//! The encoder of a changelog format. Flink never writes an update: `+I` and `+U` rows become the
//! format's insert envelope, `-U` and `-D` its delete envelope, around exactly the json format's text of
//! the row (`{"before":null,"after":{row},"op":"c"}`, ...). Every row has a payload (no tombstones).

use format_common::read::Reader;
use format_common::{ColumnBatch, ConfigError, EncodedBatch, Payloads, RowKind, RowType};
use json_codec::{Encoder as JsonEncoder, JsonOptions, encoder_with};

use crate::message::kind_name;

/// The text before and after the row of an envelope.
pub type Wrap = (&'static [u8], &'static [u8]);

/// A configured changelog encoder.
#[derive(Debug)]
pub struct Encoder {
    json: JsonEncoder,
    rt: RowType,
    insert: Wrap,
    delete: Wrap,
}

impl Encoder {
    /// An encoder of rows of `row_type` with parsed options, writing `insert` around `+I`/`+U` rows
    /// and `delete` around `-U`/`-D` rows.
    pub fn new(
        opts: JsonOptions,
        row_type: &RowType,
        insert: Wrap,
        delete: Wrap,
    ) -> Result<Encoder, ConfigError> {
        Ok(Encoder {
            json: encoder_with(opts, row_type)?,
            rt: row_type.clone(),
            insert,
            delete,
        })
    }

    /// Encodes a batch: one payload per row; a row the json format cannot write (a NULL map key with
    /// `map-null-key.mode` FAIL) gets a row error and an empty payload. `kinds`: one per row, `None`
    /// for inserts.
    pub fn encode(
        &self,
        batch: &ColumnBatch,
        kinds: Option<&[RowKind]>,
    ) -> Result<EncodedBatch, String> {
        let r = Reader::new(&self.rt, batch)?;
        let rows = batch.row_count as usize;
        if let Some(k) = kinds
            && k.len() != rows
        {
            return Err(format!("{} row kinds for {rows} rows", k.len()));
        }
        let mut out = Payloads::with_capacity(rows);
        for i in 0..rows {
            let kind = kinds.map_or(RowKind::Insert, |k| k[i]);
            let (before, after) = match kind {
                RowKind::Insert | RowKind::UpdateAfter => self.insert,
                RowKind::UpdateBefore | RowKind::Delete => self.delete,
            };
            out.payloads.extend_from_slice(before);
            match self.json.write_row(&r, i, &mut out.payloads) {
                Ok(()) => {
                    out.payloads.extend_from_slice(after);
                    out.end();
                }
                Err(e) => out.fail(
                    i,
                    format!("Could not serialize row ({}): {e}", kind_name(kind)),
                ),
            }
        }
        Ok(out.finish())
    }
}
