//! Authentication and TLS end to end against the token broker (`cargo xtask broker start --auth token`,
//! started here when it is not up): TLS with the broker's CA through `localhost` (source, sink, https
//! admin), hostname verification against `127.0.0.1` on and off, an untrusted broker, OAuth2 client
//! credentials against a mock issuer (discovery, token refresh, a wrong secret), the transaction
//! coordinator with the same settings, and `validate` printing no secret. TLS client certificates, against
//! the `mtls` broker, are in [`mtls`].
//! Needs the built plugins (`cargo xtask build-plugins`) and, for `validate`, the release binary.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use magnetar::OutgoingMessage;
use pulsar_connect::pulsar::oauth2::{OAuth2, OAuth2Config};
use pulsar_connect::pulsar::transactions::TxnCoordinator;
use pulsar_connect::pulsar::{Authentication, ClientConfig, TlsOptions};
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use xtask::broker::{BrokerInfo, Profile};

const WAIT: Duration = Duration::from_secs(60);

#[path = "pulsar_auth_mtls.rs"]
mod mtls;

// ---------------------------------------------------------------------------------------------------
// The token broker, shared by the tests of this binary: started by the first that needs it, stopped by
// the last one when this binary started it.

static USERS: Mutex<(usize, bool)> = Mutex::new((0, false));

struct TokenBroker {
    broker: TestBroker,
    /// `pulsar+ssl://localhost:<port>`.
    tls_url: String,
    /// `https://localhost:<port>`.
    tls_admin_url: String,
    tls_port: u16,
    ca_cert: PathBuf,
    secret_key: Vec<u8>,
}

impl TokenBroker {
    fn acquire() -> Result<TokenBroker> {
        {
            let mut users = USERS.lock().unwrap();
            if users.0 == 0 {
                users.1 |= pulsar_connect_tests::ensure_token_broker()?;
            }
            users.0 += 1;
        }
        let info =
            BrokerInfo::load(Profile::Token).context("no broker.json for the token profile")?;
        let (Some(tls_url), Some(tls_admin_url), Some(ca_cert), Some(tls_port)) = (
            info.tls_service_url.clone(),
            info.tls_admin_url.clone(),
            info.ca_cert_file.clone(),
            info.ports.tls_broker,
        ) else {
            panic!(
                "the running token broker has no TLS listener (started by an older xtask): restart it with `cargo xtask broker restart --auth token`"
            );
        };
        let secret_key = std::fs::read(info.secret_key_file.as_ref().unwrap())?;
        Ok(TokenBroker {
            broker: TestBroker::with_token_auth(),
            tls_url,
            tls_admin_url,
            tls_port,
            ca_cert,
            secret_key,
        })
    }

    fn token(&self) -> String {
        self.broker
            .token
            .clone()
            .expect("the token profile has an admin token")
    }
}

impl Drop for TokenBroker {
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap();
        users.0 -= 1;
        if users.0 == 0 && users.1 {
            users.1 = false;
            let _ = xtask::broker::stop(Profile::Token);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Jobs

fn order(i: u32) -> String {
    format!(r#"{{"order_id":{i},"order_status":"s{i}"}}"#)
}

async fn send_orders(broker: &TestBroker, topic: &str, n: u32) -> Result<()> {
    let client = broker.client().await?;
    let producer = client.producer(topic).create().await?;
    for i in 0..n {
        producer
            .send(OutgoingMessage::with_payload(order(i).into_bytes()).into())
            .await?;
    }
    producer.close().await?;
    Ok(())
}

/// A job reading `topic` (by an exact topic pattern, so the admin client lists it) into `collect`.
fn read_job(topic: &str, service_url: &str, admin_url: &str, extra: &str) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
        CREATE TABLE src (order_id BIGINT, order_status VARCHAR) WITH (
            'connector' = 'pulsar',
            'topic-pattern' = '{}',
            'service-url' = '{service_url}',
            'admin-url' = '{admin_url}',
            'format' = 'json',
            'scan.startup.mode' = 'earliest'{extra}
        );
        CREATE TABLE out (order_id BIGINT, order_status VARCHAR) WITH ('connector' = 'collect');
        INSERT INTO out SELECT order_id, order_status FROM src;",
        regex::escape(topic)
    )
}

fn token_auth(token: &str) -> String {
    format!(
        ",\n'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.AuthenticationToken', 'auth-params' = 'token:{token}'"
    )
}

async fn wait_finished(job: RunningJob) -> Result<u64> {
    let deadline = Instant::now() + WAIT;
    while !job.is_finished() {
        anyhow::ensure!(Instant::now() < deadline, "the job did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(job.stop().await?.0.rows_out)
}

async fn read_rows(sql: &str, n: usize) -> Result<Vec<String>> {
    let job = RunningJob::start(sql, None).await?;
    let rows = job.wait_rows(n, WAIT).await;
    job.stop().await?;
    rows
}

async fn failure(sql: &str) -> Result<String> {
    Ok(RunningJob::start(sql, None).await?.failure(WAIT).await)
}

// ---------------------------------------------------------------------------------------------------
// TLS

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_broker_ca_hostname_verification_and_an_untrusted_broker() -> Result<()> {
    let tb = TokenBroker::acquire()?;
    let token = tb.token();
    let ca = tb.ca_cert.display().to_string();
    let topic = unique_topic("auth-tls");

    // The sink writes over TLS (localhost: the name the certificate has), Flink's spelling of the option.
    let sink = format!(
        "CREATE TABLE t (order_id BIGINT, order_status VARCHAR) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
            'properties.pulsar.client.tlsTrustCertsFilePath' = '{ca}'{}
        );
        INSERT INTO t VALUES (0, 's0'), (1, 's1'), (2, 's2');",
        tb.tls_url,
        token_auth(&token)
    );
    let t0 = Instant::now();
    assert_eq!(
        wait_finished(RunningJob::start(&sink, None).await?).await?,
        3
    );
    eprintln!("sink over TLS: {:?}", t0.elapsed());

    // The source reads over TLS, the topic listed by the admin client over https with the same CA.
    let t0 = Instant::now();
    let ok = read_job(
        &topic,
        &tb.tls_url,
        &tb.tls_admin_url,
        &format!(
            ",\n'tls-trust-certs-file-path' = '{ca}'{}",
            token_auth(&token)
        ),
    );
    let rows = read_rows(&ok, 3).await?;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().any(|r| r == "+I[2, s2]"), "{rows:?}");
    eprintln!("source over TLS: {:?}", t0.elapsed());

    // 127.0.0.1 is not in the certificate: hostname verification (on by default) refuses it.
    let by_ip = format!("pulsar+ssl://127.0.0.1:{}", tb.tls_port);
    let plain_admin = tb.broker.admin_url.clone();
    let err = failure(&read_job(
        &topic,
        &by_ip,
        &plain_admin,
        &format!(
            ",\n'tls-trust-certs-file-path' = '{ca}'{}",
            token_auth(&token)
        ),
    ))
    .await?;
    eprintln!("127.0.0.1 with hostname verification: {err}");
    assert!(
        err.contains(&by_ip) && err.contains("tls-hostname-verification-enable"),
        "{err}"
    );
    assert!(!err.contains(&token), "the token was printed: {err}");

    // ... and works with hostname verification off (the chain is still checked), camelCase spelling.
    let rows = read_rows(
        &read_job(
            &topic,
            &by_ip,
            &plain_admin,
            &format!(
                ",\n'tlsTrustCertsFilePath' = '{ca}', 'tlsHostnameVerificationEnable' = 'false'{}",
                token_auth(&token)
            ),
        ),
        3,
    )
    .await?;
    assert_eq!(rows.len(), 3, "{rows:?}");

    // Without the CA the broker is not trusted.
    let err = failure(&read_job(
        &topic,
        &tb.tls_url,
        &plain_admin,
        &token_auth(&token),
    ))
    .await?;
    eprintln!("untrusted: {err}");
    assert!(
        err.contains(&tb.tls_url) && err.contains("tls-trust-certs-file-path"),
        "{err}"
    );

    // A trust file that does not exist is a configuration error naming the table and the option.
    let missing = "/nonexistent/ca.cert.pem";
    let err = match RunningJob::start(
        &read_job(
            &topic,
            &tb.tls_url,
            &plain_admin,
            &format!(",\n'tls-trust-certs-file-path' = '{missing}'"),
        ),
        None,
    )
    .await
    {
        Ok(job) => job.failure(WAIT).await,
        Err(e) => format!("{e:#}"),
    };
    eprintln!("missing trust file: {err}");
    assert!(
        err.contains("'src'") && err.contains("tls-trust-certs-file-path") && err.contains(missing),
        "{err}"
    );

    // The transaction coordinator connects with the same settings.
    let tls = TlsOptions {
        trust_certs_file: Some(ca.clone()),
        trust_certs_pem: Some(Arc::new(std::fs::read(&tb.ca_cert)?)),
        ..TlsOptions::default()
    };
    let tc = TxnCoordinator::connect(
        &ClientConfig::new(&tb.tls_url)
            .with_tls(tls)
            .with_token(token),
    )
    .await?;
    tc.close().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// OAuth2: a mock issuer with OpenID discovery and a client-credentials token endpoint that signs the
// broker's HS256 tokens.

struct MockIssuer {
    url: String,
    token_requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockIssuer {
    async fn start(
        client_id: &str,
        client_secret: &str,
        signing_key: Vec<u8>,
        expires_in: u64,
    ) -> Result<MockIssuer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let token_requests = Arc::new(AtomicUsize::new(0));
        let (base, count) = (url.clone(), token_requests.clone());
        let (id, secret) = (client_id.to_owned(), client_secret.to_owned());
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (base, count, id, secret, key) = (
                    base.clone(),
                    count.clone(),
                    id.clone(),
                    secret.clone(),
                    signing_key.clone(),
                );
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut sock).await else {
                        return;
                    };
                    let line = head.lines().next().unwrap_or_default().to_owned();
                    let (status, json) = if line
                        .starts_with("GET /.well-known/openid-configuration")
                    {
                        (
                            "200 OK",
                            serde_json::json!({"issuer": base, "token_endpoint": format!("{base}/oauth/token")}),
                        )
                    } else if line.starts_with("POST /oauth/token") {
                        count.fetch_add(1, Ordering::SeqCst);
                        let form = parse_form(&body);
                        let get =
                            |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
                        if get("grant_type") == Some("client_credentials")
                            && get("client_id") == Some(id.as_str())
                            && get("client_secret") == Some(secret.as_str())
                        {
                            let token = xtask::broker::token::sign_token(&key, "admin").unwrap();
                            (
                                "200 OK",
                                serde_json::json!({"access_token": token, "token_type": "Bearer", "expires_in": expires_in}),
                            )
                        } else {
                            // Echoes the request, as some issuers do: it must never reach a message.
                            (
                                "401 Unauthorized",
                                serde_json::json!({"error": "invalid_client", "error_description": format!("bad credentials: {}", body)}),
                            )
                        }
                    } else {
                        ("404 Not Found", serde_json::json!({"error": "not_found"}))
                    };
                    let body = json.to_string();
                    let resp = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Ok(MockIssuer {
            url,
            token_requests,
            task,
        })
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
            return Some((head, body));
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn parse_form(body: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let s = s.replace('+', " ");
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%'
                && i + 2 < b.len()
                && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
            {
                out.push(v);
                i += 3;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

const CLIENT_ID: &str = "pulsar-connect-test";
const CLIENT_SECRET: &str = "Cl13nt-S3cret-value";

fn key_file(issuer: &str, secret: &str) -> Result<tempfile::NamedTempFile> {
    pulsar_connect_tests::secret(secret);
    let f = tempfile::NamedTempFile::new()?;
    std::fs::write(
        f.path(),
        serde_json::json!({"type": "client_credentials", "client_id": CLIENT_ID, "client_secret": secret, "issuer_url": issuer})
            .to_string(),
    )?;
    Ok(f)
}

fn oauth2_auth(issuer: &str, key: &tempfile::NamedTempFile) -> String {
    format!(
        r#",
'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2',
'auth-params' = '{{"type":"client_credentials","issuerUrl":"{issuer}","privateKey":"file://{}","audience":"urn:pulsar-connect-test"}}'"#,
        key.path().display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_client_credentials_read_refresh_and_a_wrong_secret() -> Result<()> {
    let tb = TokenBroker::acquire()?;
    // expires_in 33 s: within the 30 s refresh margin after 3 s, so the refresher fetches again.
    let issuer = MockIssuer::start(CLIENT_ID, CLIENT_SECRET, tb.secret_key.clone(), 33).await?;
    let topic = unique_topic("auth-oauth2");
    send_orders(&tb.broker, &topic, 3).await?;

    // Plaintext broker and admin URLs: the admin client lists the pattern with the OAuth2 token too.
    let t0 = Instant::now();
    let key = key_file(&issuer.url, CLIENT_SECRET)?;
    let job = RunningJob::start(
        &read_job(
            &topic,
            &tb.broker.service_url,
            &tb.broker.admin_url,
            &oauth2_auth(&issuer.url, &key),
        ),
        None,
    )
    .await?;
    let rows = job.wait_rows(3, WAIT).await?;
    assert!(rows.iter().any(|r| r == "+I[2, s2]"), "{rows:?}");
    eprintln!("OAuth2 source: {:?}", t0.elapsed());
    // The token is refreshed before it expires while the job runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    while issuer.token_requests.load(Ordering::SeqCst) < 2 {
        assert!(
            Instant::now() < deadline,
            "no token refresh within 20 s ({} token requests)",
            issuer.token_requests.load(Ordering::SeqCst)
        );
        assert!(!job.is_finished(), "the job ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    job.stop().await?;

    // OAuth2 over TLS, Java's plugin short name, the key inline as a data: URL.
    use base64::Engine as _;
    let inline = base64::engine::general_purpose::STANDARD.encode(
        serde_json::json!({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).to_string(),
    );
    let rows = read_rows(
        &read_job(
            &topic,
            &tb.tls_url,
            &tb.tls_admin_url,
            &format!(
                r#",
'tls-trust-certs-file-path' = '{}',
'auth-plugin-classname' = 'oauth2',
'auth-params' = '{{"type":"client_credentials","issuerUrl":"{}","privateKey":"data:application/json;base64,{inline}"}}'"#,
                tb.ca_cert.display(),
                issuer.url
            ),
        ),
        3,
    )
    .await?;
    assert_eq!(rows.len(), 3, "{rows:?}");

    // The transaction coordinator authenticates with the same flow.
    let oauth = Arc::new(OAuth2::new(OAuth2Config {
        issuer_url: url_of(&issuer.url),
        client_id: CLIENT_ID.into(),
        client_secret: CLIENT_SECRET.into(),
        audience: None,
        scope: None,
    }));
    let mut cfg = ClientConfig::new(&tb.broker.service_url);
    cfg.auth = Authentication::OAuth2(oauth);
    TxnCoordinator::connect(&cfg).await?.close().await;

    // A wrong secret: a clear error naming the issuer, without the secret (the issuer echoed it).
    let wrong = "Wr0ng-S3cret-value";
    let bad_key = key_file(&issuer.url, wrong)?;
    let err = failure(&read_job(
        &topic,
        &tb.broker.service_url,
        &tb.broker.admin_url,
        &oauth2_auth(&issuer.url, &bad_key),
    ))
    .await?;
    eprintln!("wrong secret: {err}");
    assert!(
        err.contains(&issuer.url) && err.contains("401") && err.contains("invalid_client"),
        "{err}"
    );
    assert!(!err.contains(wrong), "the client secret was printed: {err}");
    Ok(())
}

fn url_of(s: &str) -> url::Url {
    url::Url::parse(s).unwrap()
}

// ---------------------------------------------------------------------------------------------------
// validate

fn binary() -> PathBuf {
    pulsar_connect_tests::binary()
}

#[test]
fn validate_prints_no_client_secret_and_no_token() -> Result<()> {
    let bin = binary();
    let dir = tempfile::tempdir()?;
    let key = dir.path().join("key.json");
    std::fs::write(
        &key,
        serde_json::json!({"client_id": CLIENT_ID, "client_secret": pulsar_connect_tests::secret(CLIENT_SECRET)}).to_string(),
    )?;
    let ca = dir.path().join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )?;
    let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.validate-token-signature";
    let job = format!(
        r#"CREATE TABLE a (v STRING) WITH (
    'connector' = 'pulsar', 'topic' = 'a', 'service-url' = 'pulsar+ssl://localhost:6651', 'format' = 'raw',
    'tls-trust-certs-file-path' = '{}',
    'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2',
    'auth-params' = '{{"type":"client_credentials","issuerUrl":"http://127.0.0.1:9/","privateKey":"file://{}"}}'
);
CREATE TABLE b (v STRING) WITH (
    'connector' = 'pulsar', 'topic' = 'b', 'service-url' = 'pulsar://localhost:6650', 'format' = 'raw',
    'properties.authPluginClassName' = 'token', 'properties.authParams' = 'token:{token}'
);
INSERT INTO b SELECT v FROM a;
"#,
        ca.display(),
        key.display()
    );
    let file = dir.path().join("job.sql");
    std::fs::write(&file, &job)?;
    let plugins = pulsar_connect_tests::jobs::plugin_dir();
    let out = std::process::Command::new(&bin)
        .arg("validate")
        .arg(&file)
        .arg("--plugin-dir")
        .arg(&plugins)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("auth-params"), "{text}");
    assert!(
        !text.contains(CLIENT_SECRET),
        "the client secret was printed: {text}"
    );
    assert!(!text.contains(token), "the token was printed: {text}");

    // A pulsar+ssl:// table whose trust file is missing: an error naming the table and the option.
    let broken = job.replace(&ca.display().to_string(), "/nonexistent/ca.pem");
    std::fs::write(&file, &broken)?;
    let out = std::process::Command::new(&bin)
        .arg("validate")
        .arg(&file)
        .arg("--plugin-dir")
        .arg(&plugins)
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    eprintln!("validate, missing trust file: {text}");
    assert!(
        text.contains("'a'")
            && text.contains("tls-trust-certs-file-path")
            && text.contains("/nonexistent/ca.pem"),
        "{text}"
    );
    assert!(!text.contains(CLIENT_SECRET), "{text}");
    Ok(())
}
