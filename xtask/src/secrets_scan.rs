//! The secrets scan of `cargo xtask test` (issue 36 §6).
//!
//! While the suite runs, every output of the job binary is kept in one folder (`PULSAR_CONNECT_TEST_LOGS`:
//! the test support's `binary()` hands out a wrapper that keeps a copy of stdout and stderr, or a hard
//! link when they go to a file), and tests register the secrets they hand to the binary
//! ([`register`]). Afterwards [`scan`] looks in every kept file for the registered secrets, the test
//! brokers' key material (the token key in every encoding a log could show, the admin token, each
//! line of the TLS private keys), any JWT and any PEM private key. One occurrence fails the run.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};

use crate::broker::Profile;

/// The folder the outputs are kept in; set by `cargo xtask test` for `cargo test`.
pub const ENV: &str = "PULSAR_CONNECT_TEST_LOGS";
/// The registered secrets, one hex-encoded per line (never scanned itself).
const REGISTERED: &str = "secrets.registered";
/// Kept files' names start with this; other files in the folder (the wrappers) are not outputs.
pub const OUTPUT_PREFIX: &str = "out.";
/// Shorter secrets would match ordinary text.
const MIN_LEN: usize = 6;

/// Adds `secret` to the scan's list, when a scan is running (`PULSAR_CONNECT_TEST_LOGS` is set).
pub fn register(secret: &str) {
    if let Some(dir) = std::env::var_os(ENV) {
        // A test that cannot register would weaken the scan silently: fail it instead.
        register_in(Path::new(&dir), secret.as_bytes())
            .unwrap_or_else(|e| panic!("registering a secret for the scan: {e:#}"));
    }
}

fn register_in(dir: &Path, secret: &[u8]) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(REGISTERED))
        .with_context(|| format!("opening {}", dir.join(REGISTERED).display()))?;
    // One write of a whole line: appends from parallel tests do not interleave.
    f.write_all(format!("{}\n", hex::encode(secret)).as_bytes())?;
    Ok(())
}

/// A string that must not appear, with the name a finding reports it by (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub what: String,
    pub bytes: Vec<u8>,
}

impl Secret {
    fn new(what: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            what: what.into(),
            bytes: bytes.into(),
        }
    }
}

/// An occurrence: where, and what it was (masked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: PathBuf,
    pub line: usize,
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
    }
}

/// What one scan looked at and found.
#[derive(Debug, Default)]
pub struct Report {
    pub files: usize,
    pub bytes: u64,
    pub secrets: usize,
    pub findings: Vec<Finding>,
}

/// The registered secrets of `dir` and the test brokers' key material.
pub fn secrets(dir: &Path) -> Result<Vec<Secret>> {
    let mut out = Vec::new();
    let registered = dir.join(REGISTERED);
    if registered.is_file() {
        let text = fs::read_to_string(&registered)?;
        for (i, line) in text.lines().enumerate() {
            let bytes = hex::decode(line.trim())
                .with_context(|| format!("{}:{}: not hex", registered.display(), i + 1))?;
            out.push(Secret::new(format!("registered secret #{}", i + 1), bytes));
        }
    }
    for profile in [Profile::Default, Profile::Token, Profile::Mtls] {
        out.extend(broker_material(&profile.dir())?);
    }
    out.retain(|s| s.bytes.len() >= MIN_LEN);
    out.sort_by(|a, b| a.bytes.cmp(&b.bytes));
    out.dedup_by(|a, b| a.bytes == b.bytes);
    Ok(out)
}

/// The key material a broker profile's folder holds (nothing when that profile never ran).
fn broker_material(dir: &Path) -> Result<Vec<Secret>> {
    let mut out = Vec::new();
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.as_deref().unwrap_or("?");
    if let Ok(key) = fs::read(dir.join("secret.key")) {
        let encodings = [
            ("raw", key.clone()),
            ("hex", hex::encode(&key).into_bytes()),
            ("base64", STANDARD.encode(&key).into_bytes()),
            ("base64url", URL_SAFE.encode(&key).into_bytes()),
            ("base64url", URL_SAFE_NO_PAD.encode(&key).into_bytes()),
        ];
        for (enc, bytes) in encodings {
            out.push(Secret::new(
                format!("the {name} broker's token key ({enc})"),
                bytes,
            ));
        }
    }
    if let Ok(token) = fs::read_to_string(dir.join("admin.token")) {
        out.push(Secret::new(
            format!("the {name} broker's admin token"),
            token.trim(),
        ));
    }
    let Ok(entries) = fs::read_dir(dir.join("tls")) else {
        return Ok(out);
    };
    for entry in entries {
        let path = entry?.path();
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        if !file.contains("key") {
            continue;
        }
        let text = fs::read_to_string(&path)?;
        out.extend(
            pem_body_lines(&text).map(|(i, line)| {
                Secret::new(format!("line {i} of the {name} broker's {file}"), line)
            }),
        );
    }
    Ok(out)
}

/// The base64 lines of a PEM file's bodies, numbered from 1 (the armour lines are not secret).
fn pem_body_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with("-----"))
}

/// Scans every kept output in `dir` (a file hard-linked more than once is scanned once).
pub fn scan(dir: &Path, secrets: &[Secret]) -> Result<Report> {
    let mut report = Report {
        secrets: secrets.len(),
        ..Report::default()
    };
    let mut seen = HashSet::new();
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(OUTPUT_PREFIX))
        })
        .collect();
    files.sort();
    for path in files {
        let meta = fs::metadata(&path)?;
        if !meta.is_file() || !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        report.files += 1;
        report.bytes += bytes.len() as u64;
        report.findings.extend(scan_bytes(&path, &bytes, secrets));
    }
    Ok(report)
}

/// The findings in one file's contents.
pub fn scan_bytes(path: &Path, bytes: &[u8], secrets: &[Secret]) -> Vec<Finding> {
    let line_of = |at: usize| 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
    let mut found = Vec::new();
    for s in secrets {
        if let Some(at) = memchr::memmem::find(bytes, &s.bytes) {
            found.push((at, s.what.clone()));
        }
    }
    for at in memchr::memmem::find_iter(bytes, b"PRIVATE KEY-----") {
        found.push((at, "a PEM private key".to_owned()));
    }
    for at in memchr::memmem::find_iter(bytes, b"eyJ") {
        if let Some(len) = jwt_at(&bytes[at..]) {
            found.push((at, format!("a JWT ({})", mask(&bytes[at..at + len]))));
        }
    }
    found.sort();
    // One finding per place: two encodings of a key can be the same text, or one a prefix of the other.
    found.dedup_by_key(|(at, _)| *at);
    found
        .into_iter()
        .map(|(at, what)| Finding {
            file: path.to_owned(),
            line: line_of(at),
            what,
        })
        .collect()
}

/// The length of the JWT `bytes` start with (`eyJ…` header `.` `eyJ…` payload `.` signature), if it
/// is one. A redacted token (`eyJ…` cut short, or its signature replaced) is not.
fn jwt_at(bytes: &[u8]) -> Option<usize> {
    let b64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
    let part = |from: usize| bytes[from..].iter().take_while(|b| b64(b)).count();
    let header = part(0);
    if header < 10 || bytes.get(header) != Some(&b'.') || !bytes[header + 1..].starts_with(b"eyJ") {
        return None;
    }
    let payload = part(header + 1);
    let sig_at = header + 1 + payload;
    if payload < 4 || bytes.get(sig_at) != Some(&b'.') {
        return None;
    }
    let signature = part(sig_at + 1);
    (signature > 0).then_some(sig_at + 1 + signature)
}

/// The first characters of a finding and its length: enough to find it, not enough to use it.
fn mask(bytes: &[u8]) -> String {
    let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(6)]).into_owned();
    format!("{head}… {} bytes", bytes.len())
}

/// A fresh folder for one run's outputs under the system's temporary folder.
pub fn fresh_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("pulsar-connect-test-logs-{}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl";

    fn kept(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(format!("{OUTPUT_PREFIX}{name}"));
        fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_registered_secret_in_a_kept_output_is_found_with_its_line_and_masked() {
        let dir = tempfile::tempdir().unwrap();
        register_in(dir.path(), b"Cl13nt-S3cret").unwrap();
        register_in(dir.path(), b"short").unwrap(); // below MIN_LEN: dropped
        kept(
            dir.path(),
            "1.2",
            "starting\nauth failed for Cl13nt-S3cret\n",
        );
        kept(dir.path(), "2.2", "clean\n");
        let secrets: Vec<_> = secrets(dir.path())
            .unwrap()
            .into_iter()
            .filter(|s| s.what.starts_with("registered"))
            .collect();
        assert_eq!(secrets.len(), 1);
        let report = scan(dir.path(), &secrets).unwrap();
        assert_eq!(report.files, 2);
        assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
        let f = &report.findings[0];
        assert_eq!(f.line, 2);
        assert!(f.file.ends_with("out.1.2"));
        assert!(!f.to_string().contains("Cl13nt"), "{f}");
    }

    #[test]
    fn jwts_and_pem_keys_are_found_redacted_ones_are_not() {
        let p = Path::new("out.x");
        let found = |text: &str| scan_bytes(p, text.as_bytes(), &[]);
        assert_eq!(found(&format!("token {JWT} sent")).len(), 1);
        assert!(found(JWT)[0].what.contains("eyJhbG… 54 bytes"));
        assert!(found("token eyJhbGciOi… (redacted)").is_empty());
        assert!(found("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.").is_empty());
        assert!(found("eyJ is where a JWT starts").is_empty());
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
        let f = found(pem);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].line, f[1].line), (1, 3));
        assert!(found("-----BEGIN CERTIFICATE-----").is_empty());
    }

    #[test]
    fn a_broker_token_key_is_found_in_any_encoding_and_tls_key_lines_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let key = b"0123456789abcdefghijklmnopqrstuv".to_vec();
        fs::write(dir.path().join("secret.key"), &key).unwrap();
        fs::write(dir.path().join("admin.token"), format!("{JWT}\n")).unwrap();
        fs::create_dir(dir.path().join("tls")).unwrap();
        let pem = "-----BEGIN PRIVATE KEY-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\nWVphYmNkZWZnaGlq\n-----END PRIVATE KEY-----\n";
        fs::write(dir.path().join("tls/broker.key-pk8.pem"), pem).unwrap();
        fs::write(
            dir.path().join("tls/ca.cert.pem"),
            "-----BEGIN CERTIFICATE-----\nQ0VSVElGSUNBVEU=\n",
        )
        .unwrap();
        let secrets = broker_material(dir.path()).unwrap();
        // 5 encodings, the token, 2 key lines; the certificate is public.
        assert_eq!(secrets.len(), 8, "{secrets:?}");
        for leak in [
            hex::encode(&key),
            STANDARD.encode(&key),
            URL_SAFE_NO_PAD.encode(&key),
            "WVphYmNkZWZnaGlq".to_owned(),
        ] {
            let f = scan_bytes(
                Path::new("x"),
                format!("log: {leak}\n").as_bytes(),
                &secrets,
            );
            assert_eq!(f.len(), 1, "{leak}: {f:?}");
        }
        let clean = scan_bytes(Path::new("x"), b"log: Q0VSVElGSUNBVEU=\n", &secrets);
        assert!(clean.is_empty(), "{clean:?}");
    }

    #[test]
    fn a_file_linked_twice_is_scanned_once_and_non_outputs_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = kept(dir.path(), "1.1", &format!("{JWT}\n"));
        fs::hard_link(&p, dir.path().join(format!("{OUTPUT_PREFIX}2.1"))).unwrap();
        fs::write(dir.path().join("pulsar-connect"), JWT).unwrap(); // a wrapper, not an output
        let report = scan(dir.path(), &[]).unwrap();
        assert_eq!((report.files, report.findings.len()), (1, 1));
    }
}
