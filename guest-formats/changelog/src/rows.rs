//! The decoded batch under construction: the rows of the message being read stay pending (their values
//! are in the columns, not yet ended) until the message is done, so a message adds all its rows or
//! none of them, or (`ignore-parse-errors`) the rows it completed before it failed.

use format_common::{Cols, DecodedBatch, RowError, RowKind, RowType};

pub(crate) struct Rows {
    pub(crate) cols: Cols,
    /// Top-level columns (the row type's and the metadata ones).
    top: usize,
    messages: Vec<u32>,
    /// One per ended row, then one per pending complete row.
    kinds: Vec<RowKind>,
    errors: Vec<RowError>,
    /// Complete rows of the current message.
    pending: usize,
}

impl Rows {
    pub(crate) fn new(rt: &RowType, messages: usize, bytes: usize) -> Rows {
        let mut cols = Cols::new(rt);
        cols.reserve(messages, bytes / 2);
        Rows {
            cols,
            top: rt.fields.len(),
            messages: Vec::with_capacity(messages),
            kinds: Vec::with_capacity(messages),
            errors: Vec::new(),
            pending: 0,
        }
    }

    /// A row of the current message is complete (every column has its value).
    pub(crate) fn complete(&mut self, kind: RowKind) {
        self.kinds.push(kind);
        self.pending += 1;
    }

    /// Complete rows of the current message.
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Drops the values of a row begun but not completed.
    fn cut(&mut self) {
        let n = self.cols.rows() + self.pending;
        for c in 0..self.top {
            self.cols.truncate(c, n);
        }
    }

    /// Ends message `index` with its complete rows.
    pub(crate) fn commit(&mut self, index: u32) {
        self.cut();
        for _ in 0..self.pending {
            self.cols.end_row();
            self.messages.push(index);
        }
        self.pending = 0;
    }

    /// Ends message `index` without rows: `reason` is its row error.
    pub(crate) fn fail(&mut self, index: u32, reason: String) {
        self.pending = 0;
        self.kinds.truncate(self.messages.len());
        self.cut();
        self.errors.push(RowError { index, reason });
    }

    pub(crate) fn finish(self) -> DecodedBatch {
        // `messages` can be left out when no message gave more than one row (every message has rows
        // or an error), `kinds` when every row is an insert.
        let one_each = self.messages.windows(2).all(|w| w[0] < w[1]);
        let inserts = self.kinds.iter().all(|k| matches!(k, RowKind::Insert));
        DecodedBatch {
            rows: self.cols.finish(),
            messages: (!one_each).then_some(self.messages),
            kinds: (!inserts).then_some(self.kinds),
            errors: self.errors,
        }
    }
}
