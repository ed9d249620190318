//! Checkpoint files in the state directory, accessed only through a `cap-std` directory handle.
//!
//! Layout: `<state dir>/<job id>/chk-<id, 20 digits>.json`. A file is two lines: the checkpoint as one line of
//! JSON, then `sha256 <hex of line 1>`. It is written as `*.tmp`, fsynced, renamed into place and the directory
//! fsynced, so a crash leaves either the previous complete set or the new file, never a half-written one under a
//! final name; a damaged file (e.g. a disk error, a truncated copy) fails the checksum and is skipped with a
//! warning in favour of the previous one.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// 2: per-subtask states (`sources`, `sinks`); 1 (read as one subtask each): `source`, `sink`.
pub const FORMAT_VERSION: u32 = 2;

/// The state of one pipeline (INSERT) in a checkpoint: each source subtask's and each sink subtask's, in
/// subtask order (a restore with other numbers of subtasks redistributes them, see `runtime::spawn`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "PipelineStateFile")]
pub struct PipelineState {
    pub sources: Vec<serde_json::Value>,
    pub sinks: Vec<serde_json::Value>,
}

/// What a file of either format holds for a pipeline.
#[derive(Deserialize)]
struct PipelineStateFile {
    sources: Option<Vec<serde_json::Value>>,
    sinks: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    source: serde_json::Value,
    #[serde(default)]
    sink: serde_json::Value,
}

impl From<PipelineStateFile> for PipelineState {
    fn from(f: PipelineStateFile) -> Self {
        PipelineState {
            sources: f.sources.unwrap_or_else(|| vec![f.source]),
            sinks: f.sinks.unwrap_or_else(|| vec![f.sink]),
        }
    }
}

/// One complete checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckpointData {
    pub format: u32,
    pub job_id: String,
    pub checkpoint_id: u64,
    pub created_at_ms: i64,
    pub pipelines: BTreeMap<String, PipelineState>,
}

pub struct CheckpointStore {
    dir: Dir,
    retain: usize,
    pub location: String,
}

fn file_name(id: u64) -> String {
    format!("chk-{id:020}.json")
}

fn parse_name(name: &str) -> Option<u64> {
    name.strip_prefix("chk-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

impl CheckpointStore {
    /// Opens (creating it when needed) `<state_dir>/<job_id>`.
    pub fn open(state_dir: &Path, job_id: &str, retain: usize) -> Result<Self> {
        if job_id.is_empty() || job_id.contains(['/', '\\']) || job_id == "." || job_id == ".." {
            bail!("invalid job id '{job_id}' for a state directory name");
        }
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating state directory {}", state_dir.display()))?;
        let root = Dir::open_ambient_dir(state_dir, ambient_authority())
            .with_context(|| format!("opening state directory {}", state_dir.display()))?;
        root.create_dir_all(job_id)
            .with_context(|| format!("creating {}/{job_id}", state_dir.display()))?;
        let dir = root.open_dir(job_id)?;
        Ok(CheckpointStore {
            dir,
            retain: retain.max(1),
            location: format!("{}/{job_id}", state_dir.display()),
        })
    }

    /// Checkpoint ids on disk, ascending.
    pub fn ids(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for entry in self.dir.entries()? {
            let entry = entry?;
            if let Some(id) = entry.file_name().to_str().and_then(parse_name) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn read(&self, id: u64) -> Result<CheckpointData> {
        let mut text = String::new();
        self.dir.open(file_name(id))?.read_to_string(&mut text)?;
        let (body, sum) = text
            .trim_end()
            .rsplit_once('\n')
            .ok_or_else(|| anyhow!("no checksum line (truncated file?)"))?;
        let sum = sum
            .strip_prefix("sha256 ")
            .ok_or_else(|| anyhow!("malformed checksum line"))?;
        if hex::encode(Sha256::digest(body.as_bytes())) != sum {
            bail!("checksum mismatch (damaged file)");
        }
        let data: CheckpointData = serde_json::from_str(body).context("invalid checkpoint JSON")?;
        if !(1..=FORMAT_VERSION).contains(&data.format) {
            bail!("unsupported checkpoint format {}", data.format);
        }
        if data.checkpoint_id != id {
            bail!(
                "file name says checkpoint {id} but the content is checkpoint {}",
                data.checkpoint_id
            );
        }
        Ok(data)
    }

    /// The newest readable checkpoint; damaged ones are reported (returned as warnings) and skipped.
    pub fn latest(&self) -> Result<(Option<CheckpointData>, Vec<String>)> {
        let mut warnings = Vec::new();
        for id in self.ids()?.into_iter().rev() {
            match self.read(id) {
                Ok(d) => return Ok((Some(d), warnings)),
                Err(e) => warnings.push(format!(
                    "checkpoint {} in {} is unusable ({e:#}); trying the previous one",
                    file_name(id),
                    self.location
                )),
            }
        }
        Ok((None, warnings))
    }

    /// Writes a checkpoint atomically (temp file, fsync, rename, directory fsync), then prunes old ones;
    /// returns the file's size in bytes.
    pub fn write(&self, data: &CheckpointData) -> Result<u64> {
        let body = serde_json::to_string(data)?;
        let text = format!(
            "{body}\nsha256 {}\n",
            hex::encode(Sha256::digest(body.as_bytes()))
        );
        let final_name = file_name(data.checkpoint_id);
        let tmp = format!("{final_name}.tmp");
        let written = (|| -> std::io::Result<()> {
            let mut f = self.dir.create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })();
        if let Err(e) = written {
            // Half written: never restored (only complete `chk-*.json` files are), and not left to
            // hold the space a later checkpoint needs.
            let _ = self.dir.remove_file(&tmp);
            return Err(anyhow::Error::new(e).context(format!(
                "writing checkpoint {} to {}/{tmp} (the last complete checkpoint stays the one to restore)",
                data.checkpoint_id, self.location
            )));
        }
        self.dir
            .rename(&tmp, &self.dir, &final_name)
            .with_context(|| format!("renaming {tmp} to {final_name}"))?;
        // Make the rename durable. Opening a directory for fsync is not possible on every platform; best effort.
        if let Ok(d) = self.dir.open(".") {
            let _ = d.sync_all();
        }
        let ids = self.ids()?;
        if ids.len() > self.retain {
            for id in &ids[..ids.len() - self.retain] {
                let _ = self.dir.remove_file(file_name(*id));
            }
        }
        Ok(text.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(id: u64) -> CheckpointData {
        let mut pipelines = BTreeMap::new();
        pipelines.insert(
            "0:sink".to_string(),
            PipelineState {
                sources: vec![serde_json::json!({ "emitted": id * 10 })],
                sinks: vec![serde_json::Value::Null],
            },
        );
        CheckpointData {
            format: FORMAT_VERSION,
            job_id: "j".into(),
            checkpoint_id: id,
            created_at_ms: 0,
            pipelines,
        }
    }

    #[test]
    fn a_first_format_pipeline_reads_as_one_subtask_each() {
        let old: PipelineState =
            serde_json::from_str(r#"{"source":{"splits":{}},"sink":{"commit":"(0,1)"}}"#).unwrap();
        assert_eq!(old.sources, vec![serde_json::json!({"splits": {}})]);
        assert_eq!(old.sinks, vec![serde_json::json!({"commit": "(0,1)"})]);
        let new = PipelineState {
            sources: vec![serde_json::json!(1), serde_json::json!(2)],
            sinks: vec![serde_json::Value::Null],
        };
        let text = serde_json::to_string(&new).unwrap();
        assert_eq!(text, r#"{"sources":[1,2],"sinks":[null]}"#);
        assert_eq!(serde_json::from_str::<PipelineState>(&text).unwrap(), new);
    }

    #[test]
    fn atomic_write_retention_and_corrupt_fallback() {
        let tmp = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(tmp.path(), "j", 2).unwrap();
        assert_eq!(store.latest().unwrap().0, None);
        for id in 1..=3 {
            store.write(&data(id)).unwrap();
        }
        assert_eq!(store.ids().unwrap(), vec![2, 3]);
        assert_eq!(store.latest().unwrap().0.unwrap().checkpoint_id, 3);
        // Damage the newest: the previous complete one is used and the problem reported.
        let path = tmp.path().join("j").join(file_name(3));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("30", "31")).unwrap();
        let (d, warnings) = store.latest().unwrap();
        assert_eq!(d.unwrap().checkpoint_id, 2);
        assert!(warnings[0].contains("checksum mismatch"), "{warnings:?}");
        // A truncated file (partial write) too.
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert_eq!(store.latest().unwrap().0.unwrap().checkpoint_id, 2);
        // Leftover temp files are ignored.
        std::fs::write(
            tmp.path()
                .join("j")
                .join("chk-00000000000000000009.json.tmp"),
            "x",
        )
        .unwrap();
        assert_eq!(store.latest().unwrap().0.unwrap().checkpoint_id, 2);
        assert!(CheckpointStore::open(tmp.path(), "../x", 1).is_err());
    }
}
