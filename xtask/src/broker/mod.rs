//! A real Apache Pulsar 4.0 broker for tests and the demo, without Docker.
//!
//! The broker's classpath is resolved from Maven Central (`xtask/broker/pom.xml`) and cached; the broker is
//! started as `org.apache.pulsar.PulsarStandaloneStarter` with a generated configuration on free loopback
//! ports, its data under `target/pulsar/<profile>/data`. `broker.json` in the profile folder tells tests and
//! tools where it is. Three profiles exist: `default` (no authentication), `token` (token authentication
//! and authorization; the `admin` superuser's token is written next to it; TLS listeners beside the
//! plaintext ones, with a generated CA, see [`tls`]) and `mtls` (as `token`, but its TLS listeners
//! require a client certificate, authenticated by `AuthenticationProviderTls`; xtask generates one,
//! common name [`tls::CLIENT_ROLE`], a superuser).

mod classpath;
mod config;
pub mod http;
pub mod tls;
pub mod token;

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::paths;

/// Which broker: plain, with token authentication, or with token authentication and TLS client
/// certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    Default,
    Token,
    Mtls,
    /// A plain broker that tests start wiped right before a round (`TestBroker::fresh`) and stop after
    /// it: a broker as it is after a first start, a restart or an upgrade in production, beside the
    /// default one (its own ports and data).
    Fresh,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Token => "token",
            Profile::Mtls => "mtls",
            Profile::Fresh => "fresh",
        }
    }

    /// The folder holding this profile's config, data, logs and `broker.json`.
    pub fn dir(self) -> PathBuf {
        paths::pulsar_dir().join(self.name())
    }

    fn info_file(self) -> PathBuf {
        self.dir().join("broker.json")
    }
}

/// Loopback ports a broker listens on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Ports {
    pub broker: u16,
    pub web: u16,
    pub bookie: u16,
    /// The TLS listeners (`token` and `mtls` profiles).
    #[serde(default)]
    pub tls_broker: Option<u16>,
    #[serde(default)]
    pub tls_web: Option<u16>,
}

/// What a running (or last started) broker looks like: written to `broker.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub profile: Profile,
    pub pid: i32,
    pub service_url: String,
    pub admin_url: String,
    pub ports: Ports,
    pub data_dir: PathBuf,
    pub log_file: PathBuf,
    /// For the `token` profile: the file holding the `admin` superuser's token.
    pub admin_token_file: Option<PathBuf>,
    /// For the `token` profile: the file holding the HS256 secret key (to sign more tokens in tests).
    pub secret_key_file: Option<PathBuf>,
    pub startup_seconds: f64,
    /// For the `token` profile: `pulsar+ssl://localhost:<port>` (the certificate names `localhost` only).
    #[serde(default)]
    pub tls_service_url: Option<String>,
    /// For the `token` profile: `https://localhost:<port>`.
    #[serde(default)]
    pub tls_admin_url: Option<String>,
    /// For the `token` profile: the CA certificate (PEM) that signed the broker's certificate.
    #[serde(default)]
    pub ca_cert_file: Option<PathBuf>,
    /// For the `mtls` profile: a client certificate (PEM) signed by the same CA, whose common name
    /// (`client_role`) is a superuser.
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    /// For the `mtls` profile: the client certificate's private key (PKCS#8 PEM).
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
    /// For the `mtls` profile: the role the client certificate authenticates as.
    #[serde(default)]
    pub client_role: Option<String>,
}

impl BrokerInfo {
    /// The admin token, for the `token` profile.
    pub fn admin_token(&self) -> Result<Option<String>> {
        match &self.admin_token_file {
            Some(path) => Ok(Some(fs::read_to_string(path)?.trim().to_owned())),
            None => Ok(None),
        }
    }

    /// Reads the `broker.json` of `profile`, if any.
    pub fn load(profile: Profile) -> Option<BrokerInfo> {
        let text = fs::read_to_string(profile.info_file()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether the process is alive and the admin health check answers.
    pub fn is_healthy(&self) -> bool {
        let token = self.admin_token().ok().flatten();
        process_alive(self.pid) && health(&self.admin_url, token.as_deref()).is_ok()
    }
}

/// Options for [`start`].
#[derive(Debug, Clone)]
pub struct StartOptions {
    pub profile: Profile,
    /// Delete the profile's data before starting.
    pub wipe: bool,
    /// How long to wait for the broker to become healthy.
    pub timeout: Duration,
}

impl StartOptions {
    pub fn new(profile: Profile) -> Self {
        StartOptions {
            profile,
            wipe: false,
            timeout: Duration::from_secs(240),
        }
    }
}

/// Starts the broker of `opts.profile` in the background and waits until it is healthy, has created
/// `public/default` and its transaction coordinator topic. Returns at once if it is already up.
pub fn start(opts: &StartOptions) -> Result<BrokerInfo> {
    let profile = opts.profile;
    if let Some(info) = BrokerInfo::load(profile)
        && info.is_healthy()
    {
        eprintln!(
            "broker ({}) already up: {} {}",
            profile.name(),
            info.service_url,
            info.admin_url
        );
        return Ok(info);
    }
    if let Some(info) = BrokerInfo::load(profile)
        && process_alive(info.pid)
    {
        // Up but not healthy (still starting, or wedged): stop it before starting a fresh one.
        stop_pid(info.pid, Duration::from_secs(30));
    }
    let classpath = classpath::classpath()?;
    let dir = profile.dir();
    let data_dir = dir.join("data");
    if opts.wipe && data_dir.exists() {
        fs::remove_dir_all(&data_dir).with_context(|| format!("wiping {}", data_dir.display()))?;
    }
    fs::create_dir_all(&data_dir)?;

    // Keep the previous ports when the data survives, so URLs stay valid across a restart.
    let mut ports = match BrokerInfo::load(profile) {
        Some(info) if !opts.wipe && ports_free(&info.ports) => info.ports,
        _ => Ports {
            broker: free_port()?,
            web: free_port()?,
            bookie: free_port()?,
            tls_broker: None,
            tls_web: None,
        },
    };
    let tls_files = match profile {
        Profile::Default | Profile::Fresh => {
            ports.tls_broker = None;
            ports.tls_web = None;
            None
        }
        Profile::Token | Profile::Mtls => {
            if ports.tls_broker.is_none() || ports.tls_web.is_none() {
                ports.tls_broker = Some(free_port()?);
                ports.tls_web = Some(free_port()?);
            }
            Some(tls::ensure_tls_material(&dir, profile == Profile::Mtls)?)
        }
    };

    let (token_files, admin_token) = match profile {
        Profile::Default | Profile::Fresh => (None, None),
        Profile::Token | Profile::Mtls => {
            let (key, token) = ensure_token_material(&dir)?;
            let admin_token = fs::read_to_string(&token)?.trim().to_owned();
            (Some((key, token)), Some(admin_token))
        }
    };
    let client_files = tls_files.as_ref().and_then(|f| f.client.as_ref());
    let conf_path = dir.join("standalone.conf");
    let conf = config::standalone_conf(
        &ports,
        token_files
            .as_ref()
            .map(|(k, t)| (k.as_path(), t.as_path())),
        tls_files.as_ref(),
    );
    fs::write(&conf_path, conf)?;
    let log4j = dir.join("log4j2.xml");
    fs::write(&log4j, config::LOG4J2_XML)?;
    let log_file = dir.join("broker.log");
    let stdout_file = dir.join("stdout.log");
    let stdout = fs::File::create(&stdout_file)?;

    let started = Instant::now();
    let mut cmd = Command::new(java_bin());
    cmd.args(jvm_args())
        .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
        .arg(format!("-Dpulsar.log.file={}", log_file.display()))
        .arg("-cp")
        .arg(&classpath)
        .arg("org.apache.pulsar.PulsarStandaloneStarter")
        .arg("--config")
        .arg(&conf_path)
        .args(["--no-functions-worker", "--no-stream-storage"])
        .arg("--metadata-dir")
        .arg(data_dir.join("metadata"))
        .arg("--bookkeeper-dir")
        .arg(data_dir.join("bookkeeper"))
        // Never found, so the standalone uses RocksDB metadata (PIP-117) instead of ZooKeeper.
        .arg("--zookeeper-dir")
        .arg(data_dir.join("no-zookeeper"))
        .arg("--bookkeeper-port")
        .arg(ports.bookie.to_string())
        .current_dir(&data_dir)
        .stdin(Stdio::null())
        .stdout(stdout.try_clone()?)
        .stderr(stdout)
        // Its own process group: the broker outlives `cargo xtask broker start` and is not hit by a
        // Ctrl-C aimed at the terminal's foreground job.
        .process_group(0);
    let child = cmd
        .spawn()
        .context("starting java (is a JDK 17+ installed?)")?;
    let pid = child.id() as i32;
    // The child is reaped by `stop` (same process) or re-parented when this process exits.
    drop(child);

    let info = BrokerInfo {
        profile,
        pid,
        service_url: format!("pulsar://127.0.0.1:{}", ports.broker),
        admin_url: format!("http://127.0.0.1:{}", ports.web),
        ports,
        data_dir: data_dir.clone(),
        log_file: log_file.clone(),
        admin_token_file: token_files.as_ref().map(|(_, t)| t.clone()),
        secret_key_file: token_files.as_ref().map(|(k, _)| k.clone()),
        startup_seconds: 0.0,
        tls_service_url: ports
            .tls_broker
            .map(|p| format!("pulsar+ssl://{}:{p}", tls::SERVER_NAME)),
        tls_admin_url: ports
            .tls_web
            .map(|p| format!("https://{}:{p}", tls::SERVER_NAME)),
        ca_cert_file: tls_files.as_ref().map(|f| f.ca_cert.clone()),
        client_cert_file: client_files.map(|(c, _)| c.clone()),
        client_key_file: client_files.map(|(_, k)| k.clone()),
        client_role: client_files.map(|_| tls::CLIENT_ROLE.to_owned()),
    };
    write_info(&info)?;

    let deadline = started + opts.timeout;
    loop {
        if !process_alive(pid) {
            bail!(
                "the broker exited during start-up; last lines of {}:\n{}\n(more in {})",
                stdout_file.display(),
                tail(&stdout_file, 30),
                log_file.display()
            );
        }
        let waiting_for = match ready(&info.admin_url, admin_token.as_deref()) {
            Ok(()) => break,
            Err(stage) => stage,
        };
        if Instant::now() > deadline {
            // Read the log before stopping: the shutdown buries the cause under its own lines.
            let errors = first_errors(&log_file, 12);
            let last = tail(&log_file, 15);
            stop_pid(pid, Duration::from_secs(10));
            bail!(
                "the broker was not ready after {:?}: still waiting for {waiting_for}\n\
                 first errors in {}:\n{errors}\nlast lines before stopping it:\n{last}",
                opts.timeout,
                log_file.display(),
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let info = BrokerInfo {
        startup_seconds: started.elapsed().as_secs_f64(),
        ..info
    };
    write_info(&info)?;
    eprintln!(
        "broker ({}) healthy after {:.1}s: service URL {}  admin URL {}",
        profile.name(),
        info.startup_seconds,
        info.service_url,
        info.admin_url
    );
    if let (Some(url), Some(admin), Some(ca)) = (
        &info.tls_service_url,
        &info.tls_admin_url,
        &info.ca_cert_file,
    ) {
        eprintln!(
            "  TLS: service URL {url}  admin URL {admin}  CA certificate {}",
            ca.display()
        );
    }
    if let Some(cert) = &info.client_cert_file {
        eprintln!(
            "  client certificates required on TLS; one for role '{}': {}",
            tls::CLIENT_ROLE,
            cert.display()
        );
    }
    Ok(info)
}

/// Stops the broker of `profile` cleanly (SIGTERM, then SIGKILL after 60 s). Returns whether one was running.
pub fn stop(profile: Profile) -> Result<bool> {
    let Some(info) = BrokerInfo::load(profile) else {
        return Ok(false);
    };
    if !process_alive(info.pid) {
        return Ok(false);
    }
    let started = Instant::now();
    stop_pid(info.pid, Duration::from_secs(60));
    eprintln!(
        "broker ({}) stopped in {:.1}s",
        profile.name(),
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// Stops and starts the broker of `profile` on the same ports with the same data.
pub fn restart(profile: Profile) -> Result<BrokerInfo> {
    stop(profile)?;
    start(&StartOptions::new(profile))
}

/// The broker's resident memory in KiB, from `/proc`.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn write_info(info: &BrokerInfo) -> Result<()> {
    let path = info.profile.info_file();
    let tmp = path.with_extension("json.tmp");
    fs::write(&tmp, serde_json::to_string_pretty(info)?)?;
    fs::rename(&tmp, &path)?;
    Ok(())
}

fn ensure_token_material(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let key_path = dir.join("secret.key");
    let token_path = dir.join("admin.token");
    if !key_path.is_file() || !token_path.is_file() {
        let key = token::generate_secret_key()?;
        fs::write(&key_path, &key)?;
        fs::write(&token_path, token::sign_token(&key, "admin")?)?;
    }
    Ok((key_path, token_path))
}

fn java_bin() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home).join("bin/java"),
        _ => PathBuf::from("java"),
    }
}

fn jvm_args() -> Vec<String> {
    let heap = std::env::var("PULSAR_BROKER_HEAP").unwrap_or_else(|_| "768m".to_owned());
    let mut args = vec![
        "-Xms512m".to_owned(),
        format!("-Xmx{heap}"),
        "-XX:MaxDirectMemorySize=512m".to_owned(),
        "-XX:+UseG1GC".to_owned(),
        "-Djava.net.preferIPv4Stack=true".to_owned(),
        "-Dio.netty.tryReflectionSetAccessible=true".to_owned(),
    ];
    for open in [
        "java.base/java.io",
        "java.base/java.util.zip",
        "java.base/sun.net",
        "java.management/sun.management",
        "jdk.management/com.sun.management.internal",
        "java.base/jdk.internal.misc",
    ] {
        args.push("--add-opens".to_owned());
        args.push(format!("{open}=ALL-UNNAMED"));
    }
    args
}

fn health(admin_url: &str, token: Option<&str>) -> Result<()> {
    let r = http::get(&format!("{admin_url}/admin/v2/brokers/health"), token)?;
    if r.is_success() && r.body.trim() == "ok" {
        Ok(())
    } else {
        bail!("health check answered {}: {}", r.status, r.body)
    }
}

/// Healthy, `public/default` created, the transaction coordinator's assignment topic in place, and a topic
/// lookup in `public/default` answered; otherwise which of these it is still waiting for.
fn ready(admin_url: &str, token: Option<&str>) -> Result<(), String> {
    if let Err(e) = health(admin_url, token) {
        let e = format!("{e:#}");
        return Err(format!("the admin health check ({})", first_line(&e)));
    }
    let ns = http::get(&format!("{admin_url}/admin/v2/namespaces/public"), token);
    if !matches!(&ns, Ok(r) if r.is_success() && r.body.contains("public/default")) {
        return Err("the namespace public/default".to_owned());
    }
    let tc = http::get(
        &format!(
            "{admin_url}/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions"
        ),
        token,
    );
    if !matches!(&tc, Ok(r) if r.is_success() && r.body.contains("\"partitions\":1")) {
        return Err("the transaction coordinator's assignment topic".to_owned());
    }
    // A topic lookup in public/default: the health check passes before the load manager has published
    // the broker's load report, and until then subscribing or producing anywhere in public/default fails
    // with "No available broker found" (seen for 30 s on a broker started on a loaded machine). The lookup
    // assigns the bundle to this broker; it creates no topic.
    let lookup = http::get(
        &format!(
            "{admin_url}/lookup/v2/topic/persistent/public/default/pulsar-connect-ready-probe"
        ),
        token,
    );
    if matches!(&lookup, Ok(r) if r.is_success() && r.body.contains("brokerUrl")) {
        Ok(())
    } else {
        Err(format!(
            "a topic lookup in public/default ({})",
            match &lookup {
                Ok(r) => format!("answered {}: {}", r.status, first_line(&r.body)),
                Err(e) => first_line(&format!("{e:#}")).to_string(),
            }
        ))
    }
}

fn first_line(s: &str) -> &str {
    let line = s.lines().next().unwrap_or_default();
    &line[..line.floor_char_boundary(200)]
}

/// The first `n` ERROR lines of a broker log, deduplicated by message (stack traces left out).
fn first_errors(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" ERROR "))
        .filter(|l| seen.insert(l.split_once(" - ").map_or(*l, |(_, msg)| msg)))
        .take(n)
        .collect();
    if lines.is_empty() {
        "(none)".to_owned()
    } else {
        lines.join("\n")
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn ports_free(p: &Ports) -> bool {
    [
        Some(p.broker),
        Some(p.web),
        Some(p.bookie),
        p.tls_broker,
        p.tls_web,
    ]
    .iter()
    .flatten()
    .all(|port| TcpListener::bind(("127.0.0.1", *port)).is_ok())
}

/// Whether `pid` is a live process (a zombie child counts as dead and is reaped).
pub fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: waitpid with WNOHANG on a pid only reaps it if it is our own exited child.
    unsafe {
        let mut status = 0;
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
    // SAFETY: signal 0 performs only the existence/permission check.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive && !is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn stop_pid(pid: i32, grace: Duration) {
    // SAFETY: plain signal delivery to a pid we started.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while process_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    if process_alive(pid) {
        eprintln!("broker pid {pid} did not stop within {grace:?}; killing it");
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        while process_alive(pid) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
