//! The binary under the suite's secrets scan (`xtask::secrets_scan`): a wrapper script that keeps a
//! copy of the binary's stdout and stderr in the scan's folder, then `exec`s it (same process id, so
//! signals and `kill -9` reach the binary itself).
//!
//! Per stream: a terminal is left alone (the SQL shell's pseudo-terminal tests read it back); a
//! regular file is hard-linked into the folder (it keeps growing there, and outlives the test's
//! temporary folder); `/dev/null` is replaced by a file in the folder; anything else (a pipe the test
//! reads) goes through `tee`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static WRAPPER: OnceLock<PathBuf> = OnceLock::new();

/// The wrapper around `binary` (written once per test process into `dir`).
pub fn wrapper(dir: &Path, binary: &Path) -> PathBuf {
    WRAPPER
        .get_or_init(|| {
            write(dir, binary).unwrap_or_else(|e| {
                panic!("writing the binary's wrapper into {}: {e}", dir.display())
            })
        })
        .clone()
}

fn write(dir: &Path, binary: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // Named as the binary is: clap's usage lines name argv[0]'s file, and `exec` passes the real one.
    let folder = dir.join(format!("bin-{}", std::process::id()));
    std::fs::create_dir_all(&folder)?;
    let path = folder.join("pulsar-connect");
    let script = SCRIPT
        .replace("@DIR@", &quoted(dir))
        .replace("@PREFIX@", xtask::secrets_scan::OUTPUT_PREFIX)
        .replace("@BINARY@", &quoted(binary));
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, script)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// `path` in single quotes for bash.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Absolute tool paths: some tests run the binary with an empty environment (no PATH).
const SCRIPT: &str = r#"#!/bin/bash
# pulsar-connect under the test suite's secrets scan: keeps its stdout and stderr, then execs it.
dir=@DIR@
for fd in 1 2; do
  [ -t "$fd" ] && continue
  kept="$dir/@PREFIX@$$.$fd"
  target=$(/usr/bin/readlink "/proc/$$/fd/$fd") || continue
  if [ "$target" = /dev/null ]; then
    eval "exec $fd>>\"\$kept\""
  elif [ -f "$target" ] && /usr/bin/ln -f "$target" "$kept" 2>/dev/null; then
    :
  else
    eval "exec $fd> >(exec /usr/bin/tee -a \"\$kept\" >&$fd)"
  fi
done
exec @BINARY@ "$@"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// The kept outputs of the folder, by stream (`1`/`2`), contents sorted.
    fn kept(dir: &Path, stream: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(xtask::secrets_scan::OUTPUT_PREFIX) && name.ends_with(stream)
            })
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_wrapper_keeps_piped_filed_and_discarded_output_and_passes_args_and_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake binary");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho \"out $1\"\necho \"err $2\" >&2\nexit 3\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        let wrapper = write(&logs, &fake).unwrap();
        assert_eq!(wrapper.file_name().unwrap(), "pulsar-connect");

        // stdout piped to the test, stderr to a file the test deletes afterwards.
        let log_file = dir.path().join("job.log");
        let out = Command::new(&wrapper)
            .args(["a b", "c"])
            .env_clear()
            .stderr(std::fs::File::create(&log_file).unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out a b\n");
        assert_eq!(std::fs::read_to_string(&log_file).unwrap(), "err c\n");
        std::fs::remove_file(&log_file).unwrap();
        // Both to /dev/null.
        let status = Command::new(&wrapper)
            .args(["x", "y"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(kept(&logs, ".1"), ["out a b\n", "out x\n"]);
        assert_eq!(kept(&logs, ".2"), ["err c\n", "err y\n"]);
    }
}
