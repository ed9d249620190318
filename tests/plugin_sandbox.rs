//! Hostile and broken plugins are contained: each gets a clear error naming the plugin, the call and
//! the batch, and the next call is served by a fresh instance configured like the old one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use pulsar_connect::plugins::{
    Decoder, Failure, HostConfig, KeyBatchBuilder, MessageBatchBuilder, MessageRef, Phase, Plugin,
    PluginDir, PluginHost, Router, model,
};
use pulsar_connect_tests::guests::install;

struct Fixture {
    _dir: tempfile::TempDir,
    host: PluginHost,
    plugins: PluginDir,
}

fn fixture(guests: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    for g in guests {
        install(dir.path(), g);
    }
    let host = PluginHost::new(HostConfig {
        epoch_tick: Duration::from_millis(2),
        ..HostConfig::default()
    })
    .unwrap();
    let plugins = PluginDir::open(dir.path()).unwrap();
    Fixture {
        _dir: dir,
        host,
        plugins,
    }
}

fn hostile_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("payload", DataType::Binary, true),
        Field::new("tag", DataType::Utf8, true),
        Field::new("calls", DataType::Int64, true),
        Field::new("decoders", DataType::Int64, true),
    ]))
}

fn messages(payloads: &[&str]) -> model::MessageBatch {
    let mut b = MessageBatchBuilder::new();
    for p in payloads {
        b.push(MessageRef {
            payload: p.as_bytes(),
            ..Default::default()
        });
    }
    b.finish(false)
}

fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// (tag, calls, decoders) of the only row.
fn row(batch: &RecordBatch) -> (String, i64, i64) {
    assert_eq!(batch.num_rows(), 1);
    (
        batch.column(1).as_string::<i32>().value(0).to_owned(),
        batch.column(2).as_primitive::<Int64Type>().value(0),
        batch.column(3).as_primitive::<Int64Type>().value(0),
    )
}

fn hostile_decoder(f: &Fixture) -> (Plugin, Decoder) {
    let plugin = f.host.load(&f.plugins, "hostile").unwrap();
    let decoder = Decoder::new(&plugin, &opts(&[("tag", "t1")]), hostile_schema()).unwrap();
    (plugin, decoder)
}

/// The shared shape of the trap tests: a good call, the bad one, then a good call on a fresh instance.
fn contained(command: &str, expected: Failure, message_parts: &[&str]) {
    let f = fixture(&["hostile"]);
    let (plugin, mut decoder) = hostile_decoder(&f);
    assert_eq!(
        row(&decoder.decode(messages(&["ok"])).unwrap().batch),
        ("t1".into(), 1, 1)
    );
    assert_eq!(
        row(&decoder.decode(messages(&["ok"])).unwrap().batch),
        ("t1".into(), 2, 1)
    );

    let started = Instant::now();
    let err = decoder.decode(messages(&["ok", command])).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "containment took {:?}",
        started.elapsed()
    );
    assert_eq!(err.phase, Phase::Call);
    assert_eq!(err.failure, expected, "{err}");
    let text = err.to_string();
    eprintln!("contained: {text}");
    for part in [
        "plugin `hostile`",
        "decode-batch (batch 3)",
        "a fresh instance replaced it",
    ]
    .iter()
    .chain(message_parts)
    {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }

    // The next call runs on a fresh instance (counters restart) with the same options (tag).
    let after = decoder.decode(messages(&["ok"])).unwrap();
    assert_eq!(row(&after.batch), ("t1".into(), 1, 1));
    let counters = plugin.counters();
    assert_eq!(counters.traps, 1);
    assert_eq!(counters.instantiations, 2);
    assert_eq!(counters.rows, 3);
}

#[test]
fn infinite_loop_hits_the_deadline() {
    contained("loop", Failure::Deadline, &["deadline of 300 ms"]);
}

#[test]
fn memory_bomb_hits_the_limit() {
    contained("bomb", Failure::MemoryLimit, &["memory limit of 32 MiB"]);
}

#[test]
fn panic_traps_and_reports_the_panic_message() {
    contained(
        "panic",
        Failure::Trap,
        &["trapped", "hostile guest panics on purpose"],
    );
}

#[test]
fn file_access_is_denied() {
    let f = fixture(&["hostile"]);
    let (_plugin, mut decoder) = hostile_decoder(&f);
    let decoded = decoder.decode(messages(&["file", "ok"])).unwrap();
    assert_eq!(decoded.batch.num_rows(), 1, "only `ok` decodes");
    assert_eq!(decoded.errors.len(), 1);
    assert_eq!(decoded.errors[0].index, 0);
    assert!(
        decoded.errors[0].reason.starts_with("open /etc/passwd:"),
        "{:?}",
        decoded.errors
    );
    assert_eq!(decoded.row_messages(), vec![1]);
}

#[test]
fn socket_access_is_denied() {
    // A real listener, so a refusal can only come from the sandbox.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let f = fixture(&["hostile"]);
    let (_plugin, mut decoder) = hostile_decoder(&f);
    let command = format!("socket:{port}");
    let decoded = decoder.decode(messages(&[&command])).unwrap();
    assert_eq!(decoded.batch.num_rows(), 0);
    assert_eq!(decoded.errors.len(), 1, "{:?}", decoded.errors);
    assert!(
        decoded.errors[0]
            .reason
            .starts_with(&format!("connect 127.0.0.1:{port}:")),
        "{:?}",
        decoded.errors
    );
    assert!(listener.accept().is_err(), "the guest reached the listener");
}

/// A `MakeWriter` that keeps what the log subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[test]
fn chatty_plugin_output_is_captured_and_rate_limited() {
    let f = fixture(&["hostile"]);
    let (_plugin, mut decoder) = hostile_decoder(&f);
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let started = Instant::now();
    let decoded =
        tracing::subscriber::with_default(subscriber, || decoder.decode(messages(&["shout"])))
            .unwrap();
    assert_eq!(decoded.batch.num_rows(), 1);
    assert!(started.elapsed() < Duration::from_secs(5));
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("stdout line") || l.contains("stderr line"))
        .collect();
    // 2000 lines written; the burst of 100 (plus what refills during the call) gets through.
    assert!(
        (50..=300).contains(&lines.len()),
        "{} plugin lines logged",
        lines.len()
    );
    assert!(
        lines.iter().all(|l| l.contains("plugin=\"hostile\"")),
        "{}",
        lines[0]
    );
    assert!(
        lines.iter().any(|l| l.contains("stream=\"stderr\""))
            && lines.iter().any(|l| l.contains("stream=\"stdout\""))
    );
}

#[test]
fn config_errors_and_unknown_options_are_configure_errors() {
    let f = fixture(&["hostile"]);
    let plugin = f.host.load(&f.plugins, "hostile").unwrap();

    let err = Decoder::new(&plugin, &opts(&[("tga", "x")]), hostile_schema())
        .err()
        .unwrap();
    assert_eq!(err.phase, Phase::Configure);
    let text = err.to_string();
    assert!(text.contains("plugin `hostile`"), "{text}");
    assert!(
        text.contains("unknown option `tga`; did you mean `tag`?"),
        "{text}"
    );
    assert!(text.contains("allowed: tag, refuse"), "{text}");
    assert_eq!(
        plugin.counters().instantiations,
        0,
        "options are checked before instantiating"
    );

    let err = Decoder::new(&plugin, &opts(&[("refuse", "maybe")]), hostile_schema())
        .err()
        .unwrap();
    assert!(format!("{err}").contains("expected true or false"), "{err}");

    let err = Decoder::new(&plugin, &opts(&[("refuse", "true")]), hostile_schema())
        .err()
        .unwrap();
    assert_eq!(err.phase, Phase::Configure);
    assert!(
        err.to_string()
            .contains("create-decoder refused: option `refuse`: asked to refuse"),
        "{err}"
    );
}

#[test]
fn router_routes_every_message_and_is_checked() {
    let f = fixture(&["modulo-router"]);
    let plugin = f.host.load(&f.plugins, "modulo-router").unwrap();
    let mut router = Router::new(&plugin, &[]).unwrap();
    let keys: Vec<Option<&[u8]>> = vec![
        Some(b"alpha"),
        None,
        Some(b"beta"),
        None,
        Some(b""),
        Some("ключ".as_bytes()),
    ];
    let mut kb = KeyBatchBuilder::default();
    for k in &keys {
        kb.push(*k);
    }
    let batch = kb.finish();
    let parts = router.route(&batch, None, 7).unwrap();
    let fnv = |b: &[u8]| {
        b.iter().fold(0x811c_9dc5u32, |h, &x| {
            (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
        })
    };
    for (k, p) in keys.iter().zip(&parts) {
        if let Some(k) = k {
            assert_eq!(*p, fnv(k) % 7);
        }
    }
    assert_eq!(
        (parts[1], parts[3]),
        (0, 1),
        "keyless messages go round-robin"
    );

    // Properties reach a router whose manifest asks for them.
    let mut by_prop = Router::new(&plugin, &opts(&[("by-property", "user")])).unwrap();
    let mut mb = MessageBatchBuilder::new();
    mb.push(MessageRef {
        payload: b"",
        key: Some(b"k"),
        properties: &[("user", "u1")],
        event_time: None,
    });
    mb.push(MessageRef {
        payload: b"",
        key: Some(b"k"),
        properties: &[("user", "u2")],
        event_time: None,
    });
    let m = mb.finish(true);
    let parts = by_prop.route(&m.keys, m.properties.as_ref(), 1000).unwrap();
    assert_eq!(parts, vec![fnv(b"u1") % 1000, fnv(b"u2") % 1000]);
    assert!(plugin.counters().rows >= 8);
}

#[test]
fn a_router_is_not_a_format() {
    let f = fixture(&["modulo-router"]);
    let plugin = f.host.load(&f.plugins, "modulo-router").unwrap();
    let err = Decoder::new(&plugin, &[], hostile_schema()).err().unwrap();
    assert!(
        err.to_string().contains("is a router plugin, not a format"),
        "{err}"
    );
    assert_eq!(err.phase, Phase::Configure);
    assert_eq!(plugin.counters().instantiations, 0);
}

#[test]
fn plugin_counters_are_scraped_as_prometheus_series() {
    use pulsar_connect::plugins::Kind;
    use pulsar_connect::plugins::catalog::PluginCatalog;
    use pulsar_connect::runtime::Metrics;

    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "hostile");
    let catalog = Arc::new(PluginCatalog::new(dir.path().to_path_buf()));
    let metrics = Metrics::new().unwrap();
    metrics.export_plugins(catalog.clone()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = rt
        .block_on(pulsar_connect::status::serve(
            "127.0.0.1:0".parse().unwrap(),
            metrics.clone(),
        ))
        .unwrap();
    let scrape = || {
        let r = xtask::broker::http::request("GET", &format!("http://{addr}/metrics"), None, None)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    };
    // Nothing loaded yet: no plugin series.
    assert!(!scrape().contains("plugin=\"hostile\""));

    let plugin = catalog.load("hostile", Kind::Format).unwrap();
    let mut decoder = Decoder::new(&plugin, &opts(&[("tag", "t1")]), hostile_schema()).unwrap();
    decoder.decode(messages(&["ok"])).unwrap();
    let err = decoder.decode(messages(&["panic"])).unwrap_err();
    assert_eq!(err.failure, Failure::Trap, "{err}");

    let body = scrape();
    for series in [
        "pulsar_connect_plugin_traps_total{plugin=\"hostile\"} 1",
        "pulsar_connect_plugin_instantiations_total{plugin=\"hostile\"} 2",
        "pulsar_connect_plugin_rows_total{plugin=\"hostile\"} 1",
        "# TYPE pulsar_connect_plugin_traps_total counter",
        "pulsar_connect_plugin_call_seconds_total{plugin=\"hostile\"}",
    ] {
        assert!(body.contains(series), "`{series}` missing from:\n{body}");
    }
    // Factory calls count as calls: create-decoder twice (first instance, replacement), one batch
    // that returned; the trapping call is counted as a trap only.
    assert!(
        body.contains("pulsar_connect_plugin_calls_total{plugin=\"hostile\"} 3"),
        "{body}"
    );
}
