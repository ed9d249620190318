//! How many source and sink subtasks an INSERT gets (docs/adr/0015).
//!
//! Sources: one when the connector reads with one subtask; else the table's `scan.parallelism`, else the
//! job's `parallelism.default`, else as many as the process has cores, capped by the number of splits
//! (more subtasks than splits would only idle). Sinks: one when the connector writes with one; else
//! `sink.parallelism`, else `parallelism.default`, else the sources' number — and never more than the
//! sources: each source subtask feeds exactly one sink subtask (source `i` → sink `i mod sinks`), which
//! keeps every partition's rows in order without a shuffle.

use crate::connector_api::Parallelism;

/// The subtasks of one INSERT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub sources: usize,
    pub sinks: usize,
    /// The sink table asked for more subtasks than the sources have (and got the sources' number).
    pub sinks_capped: bool,
}

/// `splits`: what the source reported (only asked for when the default applies).
pub(super) fn decide(
    read: Parallelism,
    write: Parallelism,
    default: Option<usize>,
    cores: usize,
    splits: Option<usize>,
) -> Shape {
    let sources = match read {
        Parallelism::Single => 1,
        Parallelism::Parallel(Some(n)) => n,
        Parallelism::Parallel(None) => default.unwrap_or_else(|| cores.min(splits.unwrap_or(1))),
    }
    .max(1);
    let wanted = match write {
        Parallelism::Single => 1,
        Parallelism::Parallel(Some(n)) => n,
        Parallelism::Parallel(None) => default.unwrap_or(sources),
    }
    .max(1);
    Shape {
        sources,
        sinks: wanted.min(sources),
        sinks_capped: matches!(write, Parallelism::Parallel(Some(n)) if n > sources),
    }
}

/// Whether `decide` needs the source's split count.
pub(super) fn needs_split_count(read: Parallelism, default: Option<usize>) -> bool {
    read == Parallelism::Parallel(None) && default.is_none()
}

/// The cores available to this process.
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Parallelism::{Parallel, Single};

    fn shape(sources: usize, sinks: usize) -> Shape {
        Shape {
            sources,
            sinks,
            sinks_capped: false,
        }
    }

    #[test]
    fn the_default_is_the_cores_capped_by_the_splits() {
        assert_eq!(
            decide(Parallel(None), Parallel(None), None, 2, Some(4)),
            shape(2, 2)
        );
        assert_eq!(
            decide(Parallel(None), Parallel(None), None, 8, Some(3)),
            shape(3, 3)
        );
        assert_eq!(
            decide(Parallel(None), Parallel(None), None, 8, Some(0)),
            shape(1, 1)
        );
        assert_eq!(
            decide(Parallel(None), Single, None, 4, Some(4)),
            shape(4, 1)
        );
        assert!(needs_split_count(Parallel(None), None));
        assert!(!needs_split_count(Parallel(None), Some(2)));
        assert!(!needs_split_count(Parallel(Some(2)), None));
        assert!(!needs_split_count(Single, None));
    }

    #[test]
    fn tables_override_the_job_and_sinks_never_outnumber_sources() {
        assert_eq!(
            decide(Parallel(Some(4)), Parallel(None), Some(2), 2, None),
            shape(4, 2)
        );
        assert_eq!(
            decide(Parallel(None), Parallel(Some(1)), Some(3), 2, None),
            shape(3, 1)
        );
        assert_eq!(
            decide(Parallel(Some(2)), Parallel(Some(4)), None, 2, None),
            Shape {
                sources: 2,
                sinks: 2,
                sinks_capped: true
            }
        );
        // A source that reads with one subtask ignores parallelism.default.
        assert_eq!(
            decide(Single, Parallel(None), Some(4), 8, None),
            shape(1, 1)
        );
    }
}
