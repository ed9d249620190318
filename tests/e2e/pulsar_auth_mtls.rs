//! TLS client certificates against the `mtls` broker (`cargo xtask broker start --auth mtls`, started
//! here when it is not up and then stopped by the last test that used it): its TLS listeners require a
//! certificate signed by its CA, `AuthenticationProviderTls` takes the role from it (a superuser).
//! Reading and writing with `AuthenticationTls`, exactly-once with the source linked to the sink's
//! transactions (the transaction coordinator and the https admin client present the certificate
//! too), the client settings `tlsCertificateFilePath`/`tlsKeyFilePath` beside token authentication, no
//! certificate, a key that is not the certificate's, and `validate` printing no key path.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use pulsar_connect::pulsar::client_cert::ClientCert;
use pulsar_connect::pulsar::transactions::TxnCoordinator;
use pulsar_connect::pulsar::{Authentication, ClientConfig, TlsOptions};
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};
use xtask::broker::{BrokerInfo, Profile, StartOptions};

use super::{WAIT, binary, failure, read_job, read_rows, send_orders, token_auth, wait_finished};

static USERS: Mutex<(usize, bool)> = Mutex::new((0, false));

/// The `mtls` broker, shared by the tests of this module.
struct MtlsBroker {
    /// Plaintext URLs with the admin token, to prepare topics.
    plain: TestBroker,
    tls_url: String,
    tls_admin_url: String,
    ca: String,
    cert: String,
    key: String,
}

impl MtlsBroker {
    fn acquire() -> Result<MtlsBroker> {
        {
            let mut users = USERS.lock().unwrap();
            if users.0 == 0 && !BrokerInfo::load(Profile::Mtls).is_some_and(|i| i.is_healthy()) {
                xtask::broker::start(&StartOptions::new(Profile::Mtls))?;
                users.1 = true;
            }
            users.0 += 1;
        }
        let info =
            BrokerInfo::load(Profile::Mtls).context("no broker.json for the mtls profile")?;
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let (Some(tls_url), Some(tls_admin_url), Some(ca), Some(cert), Some(key)) = (
            info.tls_service_url.clone(),
            info.tls_admin_url.clone(),
            path(&info.ca_cert_file),
            path(&info.client_cert_file),
            path(&info.client_key_file),
        ) else {
            panic!("the mtls broker's broker.json lacks its TLS listeners or client certificate");
        };
        Ok(MtlsBroker {
            plain: TestBroker {
                service_url: info.service_url.clone(),
                admin_url: info.admin_url.clone(),
                token: info.admin_token()?,
            },
            tls_url,
            tls_admin_url,
            ca,
            cert,
            key,
        })
    }

    fn token(&self) -> String {
        self.plain
            .token
            .clone()
            .expect("the mtls profile has an admin token")
    }

    /// `AuthenticationTls` with the Java client's `key:value` parameters, and the CA.
    fn tls_auth(&self) -> String {
        format!(
            ",\n'tls-trust-certs-file-path' = '{}',\n'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.AuthenticationTls',\n'auth-params' = 'tlsCertFile:{},tlsKeyFile:{}'",
            self.ca, self.cert, self.key
        )
    }
}

impl Drop for MtlsBroker {
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap();
        users.0 -= 1;
        if users.0 == 0 && users.1 {
            users.1 = false;
            let _ = xtask::broker::stop(Profile::Mtls);
        }
    }
}

/// A key file that is not the client certificate's.
fn unrelated_key(dir: &Path) -> Result<String> {
    let path = dir.join("unrelated-secret.key.pem");
    std::fs::write(&path, xtask::broker::tls::unrelated_key_pem()?)?;
    Ok(path.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_read_write_exactly_once_and_the_admin_client() -> Result<()> {
    let mb = MtlsBroker::acquire()?;
    let topic = unique_topic("mtls");

    // The sink writes with the certificate (the role is its common name).
    let sink = format!(
        "CREATE TABLE t (order_id BIGINT, order_status VARCHAR) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json'{}
        );
        INSERT INTO t VALUES (0, 's0'), (1, 's1'), (2, 's2');",
        mb.tls_url,
        mb.tls_auth()
    );
    assert_eq!(
        wait_finished(RunningJob::start(&sink, None).await?).await?,
        3
    );

    // The source reads it, the topic listed through the https admin client (which must present the
    // certificate too); the plugin's short name and its JSON parameters.
    let rows = read_rows(
        &read_job(
            &topic,
            &mb.tls_url,
            &mb.tls_admin_url,
            &format!(
                r#",
'tls-trust-certs-file-path' = '{}', 'auth-plugin-classname' = 'tls',
'auth-params' = '{{"tlsCertFile":"{}","tlsKeyFile":"{}"}}'"#,
                mb.ca, mb.cert, mb.key
            ),
        ),
        3,
    )
    .await?;
    assert!(rows.iter().any(|r| r == "+I[2, s2]"), "{rows:?}");

    // Exactly-once, the source linked to the sink's transactions (the transaction coordinator and the
    // admin REST calls of the linked source over mTLS).
    let input = unique_topic("mtls-eo-in");
    let output = unique_topic("mtls-eo-out");
    send_orders(&mb.plain, &input, 3).await?;
    let copy = RunningJob::start(
        &format!(
            "SET 'pipeline.name' = 'mtls-eo-{}';
            SET 'execution.checkpointing.interval' = '300ms';
            SET 'execution.checkpointing.timeout' = '5s';
            CREATE TABLE src (order_id BIGINT, order_status VARCHAR) WITH (
                'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{url}',
                'admin-url' = '{admin}', 'format' = 'json', 'scan.startup.mode' = 'earliest'{auth});
            CREATE TABLE dst (order_id BIGINT, order_status VARCHAR) WITH (
                'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{url}', 'format' = 'json',
                'sink.semantic' = 'exactly-once', 'transaction-timeout' = '20s',
                'max-block-time-ms' = '5000'{auth});
            INSERT INTO dst SELECT order_id, order_status FROM src;",
            std::process::id(),
            url = mb.tls_url,
            admin = mb.tls_admin_url,
            auth = mb.tls_auth()
        ),
        None,
    )
    .await?;
    // The committed output, read with token authentication and the certificate as a client setting
    // (Flink's `pulsar.client.` names under `properties.`).
    let reader = RunningJob::start(
        &read_job(
            &output,
            &mb.tls_url,
            &mb.plain.admin_url,
            &format!(
                ",\n'tls-trust-certs-file-path' = '{}',\n'properties.pulsar.client.tlsCertificateFilePath' = '{}',\n'properties.pulsar.client.tlsKeyFilePath' = '{}'{}",
                mb.ca,
                mb.cert,
                mb.key,
                token_auth(&mb.token())
            ),
        ),
        None,
    )
    .await?;
    let rows = reader.wait_rows(3, WAIT).await;
    if copy.is_finished() {
        let outcome = copy.stop().await.map(|(summary, _)| summary);
        panic!("the exactly-once copy job ended: {outcome:?}");
    }
    reader.stop().await?;
    copy.stop().await?;
    let rows = rows?;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().any(|r| r == "+I[1, s1]"), "{rows:?}");

    // The transaction coordinator on its own, authenticated by the certificate.
    let mut tls = TlsOptions {
        trust_certs_file: Some(mb.ca.clone()),
        trust_certs_pem: Some(std::sync::Arc::new(std::fs::read(&mb.ca)?)),
        ..TlsOptions::default()
    };
    tls.client_cert = Some(
        ClientCert::from_pem(
            &mb.cert,
            &std::fs::read(&mb.cert)?,
            &std::fs::read(&mb.key)?,
        )
        .map_err(|e| anyhow::anyhow!("{}", e.message))?,
    );
    let mut cfg = ClientConfig::new(&mb.tls_url).with_tls(tls);
    cfg.auth = Authentication::Tls;
    TxnCoordinator::connect(&cfg).await?.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_client_certificate_or_a_wrong_key_fail_clearly() -> Result<()> {
    let mb = MtlsBroker::acquire()?;
    let topic = unique_topic("mtls-refused");
    send_orders(&mb.plain, &topic, 1).await?;
    let ca = format!(",\n'tls-trust-certs-file-path' = '{}'", mb.ca);

    // A valid token, but no certificate: the TLS listener refuses the connection.
    let err = failure(&read_job(
        &topic,
        &mb.tls_url,
        &mb.plain.admin_url,
        &format!("{ca}{}", token_auth(&mb.token())),
    ))
    .await?;
    eprintln!("no client certificate: {err}");
    assert!(
        err.contains(&mb.tls_url) && err.contains("client certificate"),
        "{err}"
    );
    assert!(
        err.contains("tls-certificate-file-path") && err.contains("auth-params"),
        "{err}"
    );
    assert!(!err.contains(&mb.token()), "the token was printed: {err}");

    // A key that is not the certificate's: refused when the table is configured, naming the option and
    // not the key file.
    let dir = tempfile::tempdir()?;
    let wrong = unrelated_key(dir.path())?;
    let start_error = |sql: String| async move {
        match RunningJob::start(&sql, None).await {
            Ok(job) => job.failure(WAIT).await,
            Err(e) => format!("{e:#}"),
        }
    };
    let err = start_error(read_job(
        &topic,
        &mb.tls_url,
        &mb.tls_admin_url,
        &format!(
            "{ca},\n'auth-plugin-classname' = 'tls', 'auth-params' = 'tlsCertFile:{},tlsKeyFile:{wrong}'",
            mb.cert
        ),
    ))
    .await;
    eprintln!("wrong key (auth-params): {err}");
    assert!(
        err.contains("'src'")
            && err.contains("auth-params")
            && err.contains("tlsKeyFile")
            && err.contains("does not belong"),
        "{err}"
    );
    assert!(
        !err.contains("unrelated-secret"),
        "the key path was printed: {err}"
    );

    // The same through the client settings (camelCase spelling).
    let err = start_error(read_job(
        &topic,
        &mb.tls_url,
        &mb.plain.admin_url,
        &format!(
            "{ca},\n'tlsCertificateFilePath' = '{}', 'tlsKeyFilePath' = '{wrong}'{}",
            mb.cert,
            token_auth(&mb.token())
        ),
    ))
    .await;
    eprintln!("wrong key (tls-key-file-path): {err}");
    assert!(
        err.contains("'src'")
            && err.contains("tls-key-file-path")
            && err.contains("does not belong"),
        "{err}"
    );
    assert!(
        !err.contains("unrelated-secret"),
        "the key path was printed: {err}"
    );

    // A missing key file: named by its option only.
    let missing = dir.path().join("missing-secret.key.pem");
    let err = start_error(read_job(
        &topic,
        &mb.tls_url,
        &mb.plain.admin_url,
        &format!(
            "{ca},\n'auth-plugin-classname' = 'tls', 'auth-params' = 'tlsCertFile:{},tlsKeyFile:{}'",
            mb.cert,
            missing.display()
        ),
    ))
    .await;
    eprintln!("missing key file: {err}");
    assert!(
        err.contains("tlsKeyFile") && err.contains("cannot be read"),
        "{err}"
    );
    assert!(
        !err.contains("missing-secret"),
        "the key path was printed: {err}"
    );

    // AuthenticationTls over a plaintext URL cannot authenticate.
    let err = start_error(read_job(
        &topic,
        &mb.plain.service_url,
        &mb.plain.admin_url,
        &mb.tls_auth(),
    ))
    .await;
    assert!(
        err.contains("auth-plugin-classname") && err.contains("pulsar+ssl://"),
        "{err}"
    );
    Ok(())
}

#[test]
fn validate_prints_no_key_path_and_refuses_a_wrong_key() -> Result<()> {
    let bin = binary();
    let dir = tempfile::tempdir()?;
    let files = xtask::broker::tls::ensure_tls_material(dir.path(), true)?;
    let (cert, key) = files.client.clone().context("a client certificate")?;
    let secret_key = dir.path().join("secret-key-name.pem");
    std::fs::copy(&key, &secret_key)?;
    let job = format!(
        r#"CREATE TABLE a (v STRING) WITH (
    'connector' = 'pulsar', 'topic' = 'a', 'service-url' = 'pulsar+ssl://localhost:6651', 'format' = 'raw',
    'tls-trust-certs-file-path' = '{ca}',
    'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.AuthenticationTls',
    'auth-params' = 'tlsCertFile:{cert},tlsKeyFile:{key}'
);
CREATE TABLE b (v STRING) WITH (
    'connector' = 'pulsar', 'topic' = 'b', 'service-url' = 'pulsar+ssl://localhost:6651', 'format' = 'raw',
    'tls-trust-certs-file-path' = '{ca}',
    'properties.tlsCertificateFilePath' = '{cert}', 'properties.tlsKeyFilePath' = '{key}'
);
INSERT INTO b SELECT v FROM a;
"#,
        ca = files.ca_cert.display(),
        cert = cert.display(),
        key = secret_key.display()
    );
    let file = dir.path().join("job.sql");
    let validate = |sql: &str| -> Result<(bool, String)> {
        std::fs::write(&file, sql)?;
        let out = std::process::Command::new(&bin)
            .arg("validate")
            .arg(&file)
            .arg("--plugin-dir")
            .arg(pulsar_connect_tests::jobs::plugin_dir())
            .output()?;
        Ok((
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ))
    };
    let (ok, text) = validate(&job)?;
    assert!(ok, "{text}");
    assert!(
        !text.contains("secret-key-name"),
        "the key path was printed: {text}"
    );

    // A key that is not the certificate's: refused by validate, naming the table and the option.
    std::fs::write(&secret_key, xtask::broker::tls::unrelated_key_pem()?)?;
    let (ok, text) = validate(&job)?;
    eprintln!("validate, wrong key: {text}");
    assert!(!ok, "{text}");
    assert!(
        text.contains("'a'") && text.contains("auth-params") && text.contains("does not belong"),
        "{text}"
    );
    assert!(
        text.contains("'b'") && text.contains("tls-key-file-path"),
        "every table's error is reported: {text}"
    );
    assert!(
        !text.contains("secret-key-name"),
        "the key path was printed: {text}"
    );
    Ok(())
}
