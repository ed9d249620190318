//! Test support: where the real Pulsar broker is, the official Python client, unique names.
//!
//! Tests use `PULSAR_SERVICE_URL` / `PULSAR_ADMIN_URL` when set (an external cluster), otherwise the broker
//! started by `cargo xtask broker start`. A test that needs a broker and finds none fails with a message
//! saying how to start one; it never passes silently.

pub mod fault_proxy;
pub mod fresh_broker;
pub mod guests;
pub mod jobs;
mod kept_output;
pub mod raw_chunks;
pub mod tmpfs;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use magnetar::PulsarClient;
use pulsar_connect::pulsar::{ClientConfig, connect};
use xtask::broker::{BrokerInfo, Profile, http};

/// A reachable broker.
#[derive(Debug, Clone)]
pub struct TestBroker {
    pub service_url: String,
    pub admin_url: String,
    /// The `admin` superuser's token on the token-authentication profile.
    pub token: Option<String>,
}

const HOW_TO_START: &str = "start one with `cargo xtask broker start` (or run the whole suite with `cargo xtask test`), \
     or point the tests at a cluster with PULSAR_SERVICE_URL and PULSAR_ADMIN_URL";

/// With `RUST_LOG` set, the tests' own log lines (the client's, the runtime's) go to stderr, shown for
/// a failing test (`RUST_LOG=magnetar_proto::entry_flow=debug cargo xtask test -- --test e2e ...`).
///
/// Under the suite's secrets scan (`cargo xtask test`) and without `RUST_LOG`, the jobs a test runs in
/// its own process log at the binary's default level into the scan's folder, so their logs are
/// scanned as the binary's are.
pub fn init_test_logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    } else if let Some(dir) = std::env::var_os(xtask::secrets_scan::ENV) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let path = std::path::Path::new(&dir).join(format!(
                "{}{}.in-process",
                xtask::secrets_scan::OUTPUT_PREFIX,
                std::process::id()
            ));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        });
    }
}

impl TestBroker {
    /// The broker without authentication. Panics with instructions when there is none.
    pub fn get() -> TestBroker {
        init_test_logs();
        if let (Ok(service_url), Ok(admin_url)) = (
            std::env::var("PULSAR_SERVICE_URL"),
            std::env::var("PULSAR_ADMIN_URL"),
        ) {
            return TestBroker {
                service_url,
                admin_url,
                token: None,
            };
        }
        Self::from_profile(Profile::Default)
    }

    /// The broker with token authentication (`cargo xtask broker start --auth token`).
    pub fn with_token_auth() -> TestBroker {
        init_test_logs();
        Self::from_profile(Profile::Token)
    }

    fn from_profile(profile: Profile) -> TestBroker {
        let flag = if profile == Profile::Token {
            " --auth token"
        } else {
            ""
        };
        let Some(info) = BrokerInfo::load(profile) else {
            panic!(
                "this test needs a real Apache Pulsar broker ({} profile) and none was started: {}",
                profile.name(),
                HOW_TO_START.replace("broker start`", &format!("broker start{flag}`"))
            );
        };
        if !info.is_healthy() {
            panic!(
                "the Pulsar broker ({} profile) recorded in {} is not answering: {}",
                profile.name(),
                profile.dir().join("broker.json").display(),
                HOW_TO_START.replace("broker start`", &format!("broker start{flag}`"))
            );
        }
        let token = info
            .admin_token()
            .expect("reading the broker's admin token");
        TestBroker {
            service_url: info.service_url,
            admin_url: info.admin_url,
            token,
        }
    }

    /// A client with supervised reconnect (and the admin token on the token profile).
    pub async fn client(&self) -> Result<PulsarClient> {
        let mut config = ClientConfig::new(&self.service_url);
        if let Some(token) = &self.token {
            config = config.with_token(token.clone());
        }
        Ok(connect(&config).await?)
    }

    /// One admin REST call (`path` starts with `/admin/v2/...`); fails on a non-2xx answer.
    pub fn admin(&self, method: &str, path: &str, body: Option<&str>) -> Result<String> {
        let url = format!("{}{}", self.admin_url, path);
        let r = http::request(method, &url, body, self.token.as_deref())?;
        if !r.is_success() {
            bail!("{method} {path} answered {}: {}", r.status, r.body);
        }
        Ok(r.body)
    }

    /// Creates the non-partitioned `topic` with a topic policy under which the broker refuses every
    /// message above `bytes` (a way to make one send fail), and waits until the broker applies it.
    pub fn create_topic_with_max_message_size(&self, topic: &str, bytes: u32) -> Result<()> {
        let path = topic_path(topic)?;
        self.admin("PUT", &format!("/admin/v2/persistent/{path}"), None)?;
        self.set_topic_policy(topic, "maxMessageSize", Some(&bytes.to_string()), |v| {
            v.trim() == bytes.to_string()
        })
    }

    /// Limits how fast the broker dispatches `topic` (each partition of a partitioned one) to its
    /// subscriptions, to `per_second` messages a second (none: lifts the limit), and waits until the
    /// broker applies it. A way to keep a job's input in flight for as long as a test needs.
    pub fn throttle_dispatch(&self, topic: &str, per_second: Option<u32>) -> Result<()> {
        let body = per_second.map(|n| {
            format!(
                r#"{{"dispatchThrottlingRateInMsg":{n},"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1,"relativeToPublishRate":false}}"#
            )
        });
        self.set_topic_policy(topic, "dispatchRate", body.as_deref(), |v| {
            let rate = serde_json::from_str::<serde_json::Value>(v)
                .ok()
                .and_then(|v| v["dispatchThrottlingRateInMsg"].as_u64());
            rate == per_second.map(u64::from)
        })
    }

    /// Keeps every message of `topic` (a retention policy without limits), and waits until the broker
    /// applies it. Without retention the broker keeps messages only for the subscriptions that exist
    /// when they arrive: a job that subscribes after a broker restart (its ledgers roll over then) finds
    /// the input written before it subscribed gone, and waits for input that never comes.
    pub fn retain_all(&self, topic: &str) -> Result<()> {
        // A policy needs its topic: a missing one is created (non-partitioned); an existing one stays.
        let _ = self.admin(
            "PUT",
            &format!("/admin/v2/persistent/{}", topic_path(topic)?),
            None,
        );
        self.set_topic_policy(
            topic,
            "retention",
            Some(r#"{"retentionTimeInMinutes":-1,"retentionSizeInMB":-1}"#),
            |v| {
                serde_json::from_str::<serde_json::Value>(v)
                    .is_ok_and(|v| v["retentionTimeInMinutes"].as_i64() == Some(-1))
            },
        )
    }

    /// Sets (POST `body`) or removes (no body: DELETE) the topic policy `policy` of `topic` and waits
    /// until the broker reports it `applied` (topic policies travel through a system topic).
    fn set_topic_policy(
        &self,
        topic: &str,
        policy: &str,
        body: Option<&str>,
        applied: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let policy = format!("/admin/v2/persistent/{}/{policy}", topic_path(topic)?);
        match body {
            Some(body) => self.admin("POST", &policy, Some(body))?,
            None => self.admin("DELETE", &policy, None)?,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !self.admin("GET", &policy, None).is_ok_and(|v| applied(&v)) {
            if std::time::Instant::now() > deadline {
                bail!("the policy {policy} was not applied within 30 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Ok(())
    }

    /// Creates a partitioned topic (`persistent://tenant/ns/name`) with `partitions` partitions.
    pub fn create_partitioned_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        let path = topic_path(topic)?;
        self.admin(
            "PUT",
            &format!("/admin/v2/persistent/{path}/partitions"),
            Some(&partitions.to_string()),
        )?;
        Ok(())
    }
}

/// Starts the token-authentication broker when it is not up; returns whether this call started it.
pub fn ensure_token_broker() -> Result<bool> {
    use xtask::broker::StartOptions;
    if BrokerInfo::load(Profile::Token).is_some_and(|i| i.is_healthy()) {
        return Ok(false);
    }
    xtask::broker::start(&StartOptions::new(Profile::Token))?;
    Ok(true)
}

/// A topic name no other test (or earlier run) uses: `persistent://public/default/<prefix>-<unique>`.
pub fn unique_topic(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "persistent://public/default/{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The interpreter of the venv holding the official `pulsar-client` (`PULSAR_CONNECT_PYTHON`, else
/// `.venv/bin/python`). Panics with instructions when it is missing.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PULSAR_CONNECT_PYTHON") {
        return PathBuf::from(p);
    }
    let p = xtask::python::python_bin();
    if !p.is_file() {
        panic!(
            "this test needs the official Python pulsar-client in {}: create it with `cargo xtask venv` \
             (or run the whole suite with `cargo xtask test`)",
            p.display()
        );
    }
    p
}

/// `tests/python/<name>`.
pub fn python_script(name: &str) -> PathBuf {
    xtask::paths::workspace_root()
        .join("tests/python")
        .join(name)
}

/// Runs `tests/python/interop.py` with `args` and returns the JSON records it printed (`@@` lines).
pub fn run_python(args: &[&str]) -> anyhow::Result<Vec<serde_json::Value>> {
    use anyhow::Context as _;
    let out = std::process::Command::new(python())
        .arg(python_script("interop.py"))
        .args(args)
        .output()
        .context("running the Python interop driver")?;
    if !out.status.success() {
        anyhow::bail!(
            "interop.py {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    marked_records(out.stdout)
}

/// The JSON records an interop driver printed on lines starting with `@@` (the Python and Java drivers).
pub fn marked_records(stdout: Vec<u8>) -> anyhow::Result<Vec<serde_json::Value>> {
    use anyhow::Context as _;
    String::from_utf8(stdout)?
        .lines()
        .filter_map(|l| l.strip_prefix("@@"))
        .map(|l| serde_json::from_str(l).with_context(|| format!("parsing {l}")))
        .collect()
}

/// The `columns` of a golden-vector file (tests/golden/README.md) as (name, Flink type) pairs.
pub fn vector_columns(file: &serde_json::Value) -> Vec<(String, String)> {
    file["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The release binary: `PULSAR_CONNECT_BIN`, else `release/pulsar-connect` in cargo's target directory
/// (`CARGO_TARGET_DIR` when set, else `<workspace>/target`); build it first with
/// `cargo build --release -p pulsar-connect` (`cargo xtask test` does).
pub fn binary() -> std::path::PathBuf {
    let p = std::env::var_os("PULSAR_CONNECT_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| xtask::paths::target_dir().join("release/pulsar-connect"));
    assert!(
        p.exists(),
        "{} not found: run `cargo build --release -p pulsar-connect` first (or set PULSAR_CONNECT_BIN)",
        p.display()
    );
    match std::env::var_os(xtask::secrets_scan::ENV) {
        Some(dir) => kept_output::wrapper(std::path::Path::new(&dir), &p),
        None => p,
    }
}

/// Registers a secret a test hands to the binary: the suite's secrets scan (`cargo xtask test`) fails
/// when it appears in any of the binary's outputs.
pub fn secret(s: &str) -> &str {
    xtask::secrets_scan::register(s);
    s
}

/// `tenant/ns/name` of a `persistent://tenant/ns/name` topic (as the admin REST paths take it).
fn topic_path(topic: &str) -> Result<&str> {
    topic
        .strip_prefix("persistent://")
        .with_context(|| format!("expected a persistent:// topic, got {topic}"))
}
