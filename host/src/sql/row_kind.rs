//! Flink's `RowKind` and `ChangelogMode`: which kind of change a row is, and which kinds a table produces or
//! accepts (ADR 0016). Batches carry kinds as a column (`connector_api::changelog`).

/// Flink's `RowKind`, with its byte values (`RowKind.toByteValue()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum RowKind {
    /// `+I`
    Insert = 0,
    /// `-U`
    UpdateBefore = 1,
    /// `+U`
    UpdateAfter = 2,
    /// `-D`
    Delete = 3,
}

impl RowKind {
    pub const ALL: [RowKind; 4] = [
        RowKind::Insert,
        RowKind::UpdateBefore,
        RowKind::UpdateAfter,
        RowKind::Delete,
    ];

    /// `+I`, `-U`, `+U`, `-D` (`RowKind.shortString()`).
    pub fn short_string(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// `INSERT`, `UPDATE_BEFORE`, `UPDATE_AFTER`, `DELETE` (the enum constant, as manifests spell it).
    pub fn name(self) -> &'static str {
        match self {
            RowKind::Insert => "INSERT",
            RowKind::UpdateBefore => "UPDATE_BEFORE",
            RowKind::UpdateAfter => "UPDATE_AFTER",
            RowKind::Delete => "DELETE",
        }
    }

    pub fn from_byte(b: u8) -> Option<RowKind> {
        RowKind::ALL.get(b as usize).copied()
    }

    /// Parses a manifest's spelling, case-insensitively (`update_after`, `UPDATE-AFTER` too).
    pub fn parse(text: &str) -> Option<RowKind> {
        let t = text.trim().replace('-', "_");
        RowKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(&t))
    }
}

/// The row kinds a table produces (source) or accepts (sink), as Flink's `ChangelogMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangelogMode(u8);

impl ChangelogMode {
    pub const INSERT_ONLY: ChangelogMode = ChangelogMode(1);
    pub const ALL: ChangelogMode = ChangelogMode(0b1111);
    /// `+U` and `-D`: what an upsert source produces (Flink's `ChangelogMode.upsert()`).
    pub const UPSERT: ChangelogMode = ChangelogMode(0b1101);

    pub fn of(kinds: impl IntoIterator<Item = RowKind>) -> ChangelogMode {
        ChangelogMode(kinds.into_iter().fold(0, |m, k| m | (1 << k as u8)))
    }

    pub fn contains(self, kind: RowKind) -> bool {
        self.0 & (1 << kind as u8) != 0
    }

    /// Every kind of `other` is one of ours.
    pub fn covers(self, other: ChangelogMode) -> bool {
        other.0 & !self.0 == 0
    }

    pub fn is_insert_only(self) -> bool {
        self.0 == ChangelogMode::INSERT_ONLY.0
    }

    pub fn kinds(self) -> impl Iterator<Item = RowKind> {
        RowKind::ALL.into_iter().filter(move |k| self.contains(*k))
    }
}

impl std::fmt::Display for ChangelogMode {
    /// `[INSERT, UPDATE_AFTER, DELETE]`, as Flink prints a `ChangelogMode`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.kinds().map(RowKind::name).collect();
        write!(f, "[{}]", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_names() {
        assert_eq!(RowKind::parse("update_after"), Some(RowKind::UpdateAfter));
        assert_eq!(RowKind::parse("UPDATE-BEFORE"), Some(RowKind::UpdateBefore));
        assert_eq!(RowKind::parse("upsert"), None);
        assert!(ChangelogMode::ALL.covers(ChangelogMode::UPSERT));
        assert!(!ChangelogMode::INSERT_ONLY.covers(ChangelogMode::UPSERT));
        assert!(ChangelogMode::UPSERT.covers(ChangelogMode::INSERT_ONLY));
        assert_eq!(
            ChangelogMode::UPSERT.to_string(),
            "[INSERT, UPDATE_AFTER, DELETE]"
        );
        assert_eq!(
            ChangelogMode::of([RowKind::Delete, RowKind::Insert]),
            ChangelogMode(0b1001)
        );
        assert_eq!(
            RowKind::ALL.map(RowKind::short_string),
            ["+I", "-U", "+U", "-D"]
        );
    }
}
