//! Exactly-once without a linked Pulsar source: the transactions a sink subtask may have open, written to
//! the job's state directory before each is used (ADR 0026). A checkpoint names the transactions of its
//! period, but not the one a run opened before its first checkpoint completed, nor the one opened at a
//! pre-commit whose checkpoint never completed; a run killed then leaves it open for the whole
//! `transaction-timeout`, holding every reader of the output back. The next run aborts every transaction an
//! earlier run journaled, except the restored checkpoint's own (committed first): the rows come again
//! from the restored source position. (Linked, the records are topic properties instead: the processes
//! of a job need not share a disk; ADR 0023.)
//!
//! One file per run and sink subtask, `<state dir>/sink-transactions/<pipeline>~<table>~<subtask>~<run>.json`,
//! replaced atomically (written, synced, renamed) at every new transaction.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::pulsar::transactions::TxnRef;

const DIR: &str = "sink-transactions";

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    pipeline: String,
    table: String,
    subtask: usize,
    run: String,
    transactions: Vec<String>,
}

/// An earlier run's journal: its subtask, its transactions and its file (removed once they are ended).
#[derive(Debug)]
pub(super) struct Earlier {
    pub subtask: usize,
    pub run: String,
    pub transactions: Vec<TxnRef>,
    pub file: PathBuf,
}

/// Which earlier runs' journals a sink subtask settles at start, so that every journal is settled by
/// exactly one subtask and never one whose restored checkpoint another subtask still has to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settle {
    /// No checkpoint restored: nothing is to be committed; subtask 0 settles every journal.
    Fresh,
    /// The checkpoint's state of `n` earlier subtasks was handed to this one: one (the number of
    /// subtasks is unchanged: its own index; subtask 0 also the indices no subtask has now), none (it
    /// changed and subtask 0 settles them) or several (it changed and this is subtask 0: all).
    Restored(usize),
}

impl Settle {
    fn covers(self, earlier: usize, me: crate::connector_api::Subtask) -> bool {
        match self {
            Settle::Fresh | Settle::Restored(2..) => me.index == 0,
            Settle::Restored(0) => false,
            Settle::Restored(_) => earlier == me.index || (me.index == 0 && earlier >= me.count),
        }
    }
}

pub(super) struct TxnJournal {
    dir: PathBuf,
    pipeline: String,
    table: String,
    subtask: crate::connector_api::Subtask,
    run: String,
}

/// A file name part from a name of the job: letters, digits, `-` and `_` kept, the rest `_` (the
/// entry itself holds the exact names).
fn part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl TxnJournal {
    pub(super) fn new(
        state_dir: &Path,
        pipeline: &str,
        table: &str,
        subtask: crate::connector_api::Subtask,
        run: &str,
    ) -> Self {
        TxnJournal {
            dir: state_dir.join(DIR),
            pipeline: pipeline.to_owned(),
            table: table.to_owned(),
            subtask,
            run: run.to_owned(),
        }
    }

    fn prefix(&self) -> String {
        format!("{}~{}~", part(&self.pipeline), part(&self.table))
    }

    fn file(&self) -> PathBuf {
        self.dir.join(format!(
            "{}{}~{}.json",
            self.prefix(),
            self.subtask.index,
            part(&self.run)
        ))
    }

    /// Replaces this run's journal with `open` (durably: written, synced, renamed, the directory synced)
    /// before any of them is used.
    pub(super) async fn record(&self, open: &[TxnRef]) -> Result<()> {
        let entry = Entry {
            pipeline: self.pipeline.clone(),
            table: self.table.clone(),
            subtask: self.subtask.index,
            run: self.run.clone(),
            transactions: open.iter().map(ToString::to_string).collect(),
        };
        let (dir, file) = (self.dir.clone(), self.file());
        tokio::task::spawn_blocking(move || write_durably(&dir, &file, &entry))
            .await
            .context("the transaction journal's writer")?
    }

    /// The journals of earlier runs of this pipeline's sink table that this subtask settles.
    pub(super) async fn earlier(&self, settle: Settle) -> Result<Vec<Earlier>> {
        let (dir, prefix) = (self.dir.clone(), self.prefix());
        let found = tokio::task::spawn_blocking(move || read_all(&dir, &prefix))
            .await
            .context("the transaction journal's reader")??;
        let mut out = Vec::new();
        for (file, entry) in found {
            if entry.pipeline != self.pipeline
                || entry.table != self.table
                || entry.run == self.run
                || !settle.covers(entry.subtask, self.subtask)
            {
                continue;
            }
            let transactions = entry
                .transactions
                .iter()
                .map(|t| t.parse())
                .collect::<Result<Vec<TxnRef>>>()
                .with_context(|| format!("the transaction journal {}", file.display()))?;
            out.push(Earlier {
                subtask: entry.subtask,
                run: entry.run,
                transactions,
                file,
            });
        }
        Ok(out)
    }

    /// Removes an earlier run's journal whose transactions are all ended.
    pub(super) async fn remove(&self, earlier: &Earlier) -> Result<()> {
        let file = earlier.file.clone();
        tokio::task::spawn_blocking(move || match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", file.display()))
            }
            _ => Ok(()),
        })
        .await
        .context("the transaction journal's writer")?
    }
}

fn write_durably(dir: &Path, file: &Path, entry: &Entry) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = file.with_extension("json.tmp");
    let body = serde_json::to_vec(entry)?;
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&body)?;
        f.sync_all()
    });
    if let Err(e) = written {
        // A full or read-only directory: nothing half-written stays behind.
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    std::fs::rename(&tmp, file).with_context(|| format!("renaming {}", tmp.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

fn read_all(dir: &Path, prefix: &str) -> Result<Vec<(PathBuf, Entry)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for e in entries {
        let path = e
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with(prefix) || !name.ends_with(".json") {
            continue;
        }
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let entry = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a transaction journal", path.display()))?;
        out.push((path, entry));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector_api::Subtask;
    use magnetar::proto::TxnId;

    fn txn(n: u64) -> TxnRef {
        TxnRef(TxnId::new(0, n))
    }

    fn journal(dir: &Path, index: usize, count: usize, run: &str) -> TxnJournal {
        TxnJournal::new(dir, "0", "dst.table", Subtask { index, count }, run)
    }

    #[tokio::test]
    async fn an_earlier_runs_journal_is_found_and_this_runs_is_not() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let old = journal(dir.path(), 0, 1, "old");
        old.record(&[txn(1)]).await?;
        old.record(&[txn(1), txn(2)]).await?;
        let now = journal(dir.path(), 0, 1, "new");
        now.record(&[txn(3)]).await?;
        let found = now.earlier(Settle::Fresh).await?;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].run, "old");
        assert_eq!(found[0].transactions, vec![txn(1), txn(2)]);
        now.remove(&found[0]).await?;
        assert!(now.earlier(Settle::Fresh).await?.is_empty());
        // Another table's journal is not this one's.
        let other = TxnJournal::new(dir.path(), "0", "dst_table", Subtask::SOLE, "old");
        other.record(&[txn(4)]).await?;
        assert!(now.earlier(Settle::Fresh).await?.is_empty());
        Ok(())
    }

    #[test]
    fn every_earlier_subtask_is_settled_by_exactly_one_subtask() {
        let settled_by = |settle: &dyn Fn(usize) -> Settle, earlier: usize, count: usize| {
            (0..count)
                .filter(|&i| settle(i).covers(earlier, Subtask { index: i, count }))
                .count()
        };
        for count in 1..4 {
            for earlier in 0..6 {
                // No checkpoint restored.
                assert_eq!(settled_by(&|_| Settle::Fresh, earlier, count), 1);
                // As many subtasks as before: each its own state.
                assert_eq!(settled_by(&|_| Settle::Restored(1), earlier, count), 1);
                // A different number: subtask 0 got them all.
                let changed = |i| Settle::Restored(if i == 0 { 3 } else { 0 });
                assert_eq!(settled_by(&changed, earlier, count), 1);
            }
        }
        // Unchanged: subtask 1 settles its own journal, not subtask 0 (which could abort a transaction
        // subtask 1 commits from its restored state).
        let me = |index| Subtask { index, count: 2 };
        assert!(Settle::Restored(1).covers(1, me(1)));
        assert!(!Settle::Restored(1).covers(1, me(0)));
    }
}
