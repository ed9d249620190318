//! Hot reload in the plugin layer (ADR 0024): a catalog watching its directory stages a new sha256; a
//! decoder switches to it only after a completed checkpoint, keeps the table's options, and the new
//! version is in use after its first batches. A version whose factory refuses stays unused; one that
//! traps in its first batches is rolled back and the version before it decodes the batch. A router
//! switches the same way.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use pulsar_connect::plugins::catalog::PluginCatalog;
use pulsar_connect::plugins::{Decoder, Kind, MessageBatchBuilder, MessageRef, Plugin, model};
use pulsar_connect_tests::guests::{hostile_build, install_with};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("payload", DataType::Binary, true),
        Field::new("tag", DataType::Utf8, true),
        Field::new("calls", DataType::Int64, true),
        Field::new("decoders", DataType::Int64, true),
    ]))
}

fn messages(n: usize) -> model::MessageBatch {
    let mut b = MessageBatchBuilder::new();
    for i in 0..n {
        let payload = format!("m{i}");
        b.push(MessageRef {
            payload: payload.as_bytes(),
            ..Default::default()
        });
    }
    b.finish(false)
}

fn tags(batch: &RecordBatch) -> Vec<String> {
    let t = batch.column(1).as_string::<i32>();
    (0..batch.num_rows())
        .map(|i| t.value(i).to_owned())
        .collect()
}

/// Installs build `n` of the hostile guest ([`hostile_build`]: version `n.0.0`, tag `vn`); its sha256.
fn put(dir: &Path, n: u32, refuse: bool, panic: bool) -> String {
    let build = hostile_build(n, refuse, panic);
    // Written into a staging folder and renamed, as `plugins install` replaces a plugin in one step.
    let staging = tempfile::tempdir_in(dir).unwrap();
    install_with(staging.path(), "hostile", &build.manifest, &build.wasm);
    let target = dir.join("hostile");
    let old = dir.join(format!(".old-{n}"));
    if target.exists() {
        std::fs::rename(&target, &old).unwrap();
    }
    std::fs::rename(staging.path().join("hostile"), &target).unwrap();
    let _ = std::fs::remove_dir_all(&old);
    build.sha256
}

fn wait_staged(catalog: &PluginCatalog, version: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let report = catalog.versions().into_iter().find(|(n, _)| n == "hostile");
        if report.as_ref().is_some_and(|(_, r)| {
            r.staged.as_ref().is_some_and(|s| s.version == version)
                || r.problem.as_deref().is_some_and(|p| p.contains(version))
        }) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "version {version} not staged: {report:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn in_use(catalog: &PluginCatalog) -> (String, String, Option<String>) {
    let (_, r) = catalog
        .versions()
        .into_iter()
        .find(|(n, _)| n == "hostile")
        .unwrap();
    (r.in_use.version, r.in_use.sha256, r.problem)
}

/// The catalog of `dir` (its folder scanned every `reload`, or never), the hostile plugin and a decoder.
fn watched(dir: &Path, reload: Option<Duration>) -> (PluginCatalog, Plugin, Decoder) {
    let catalog = PluginCatalog::new(dir.to_owned()).with_reload(reload);
    let plugin = catalog.load("hostile", Kind::Format).unwrap();
    let decoder = Decoder::new(&plugin, &[], schema()).unwrap();
    (catalog, plugin, decoder)
}

#[test]
fn a_decoder_switches_at_a_completed_checkpoint_and_refuses_or_rolls_back_bad_versions() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), 1, false, false);
    let (catalog, plugin, mut decoder) = watched(dir.path(), Some(Duration::from_millis(100)));
    let mut tagged = Decoder::new(&plugin, &[("tag".into(), "mine".into())], schema()).unwrap();
    assert_eq!(
        tags(&decoder.decode(messages(2)).unwrap().batch),
        ["v1", "v1"]
    );

    // Staged, but not used before a checkpoint completed.
    let sha2 = put(dir.path(), 2, false, false);
    wait_staged(&catalog, "2.0.0");
    assert_eq!(tags(&decoder.decode(messages(1)).unwrap().batch), ["v1"]);
    assert_eq!(in_use(&catalog).0, "1.0.0");
    decoder.checkpoint_completed();
    tagged.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(3)).unwrap().batch), ["v2"; 3]);
    assert_eq!(decoder.version().version, "2.0.0");
    // The table's own options are kept; the new manifest's defaults fill in the rest.
    assert_eq!(tags(&tagged.decode(messages(1)).unwrap().batch), ["mine"]);
    assert_eq!(tagged.version().sha256, sha2);
    assert_eq!(
        in_use(&catalog).0,
        "1.0.0",
        "on probation for its first batches"
    );
    for _ in 0..4 {
        decoder.decode(messages(1)).unwrap();
    }
    assert_eq!(in_use(&catalog).0, "2.0.0");
    assert_eq!(in_use(&catalog).1, sha2);
    // New decoders start on the version in use.
    let fresh = catalog.load("hostile", Kind::Format).unwrap();
    assert_eq!(fresh.version(), "2.0.0");

    // A factory that refuses: the version in use stays.
    put(dir.path(), 3, true, false);
    wait_staged(&catalog, "3.0.0");
    decoder.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(2)).unwrap().batch), ["v2"; 2]);
    let (version, _, problem) = in_use(&catalog);
    assert_eq!(version, "2.0.0");
    let problem = problem.unwrap();
    assert!(
        problem.contains("3.0.0") && problem.contains("asked to refuse"),
        "{problem}"
    );

    // A version that traps in its first batch: rolled back, the batch decoded by the one before.
    put(dir.path(), 4, false, true);
    wait_staged(&catalog, "4.0.0");
    decoder.checkpoint_completed();
    tagged.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(4)).unwrap().batch), ["v2"; 4]);
    assert_eq!(decoder.version().version, "2.0.0");
    let (version, _, problem) = in_use(&catalog);
    assert_eq!(version, "2.0.0");
    assert!(problem.unwrap().contains("4.0.0"));
    // Another instance asked to switch at the same checkpoint does not try it any more.
    assert_eq!(tags(&tagged.decode(messages(1)).unwrap().batch), ["mine"]);
    assert_eq!(tagged.version().version, "2.0.0");
    // A refused version is not tried again by later checkpoints.
    decoder.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(1)).unwrap().batch), ["v2"]);

    let counters = catalog
        .counters()
        .into_iter()
        .find(|(n, _)| n == "hostile")
        .unwrap()
        .1;
    assert_eq!(counters.versions_switched, 1);
    assert_eq!(counters.versions_refused, 1);
    assert_eq!(counters.versions_rolled_back, 1);
    assert!(counters.traps >= 1, "{counters:?}");

    // A later good build is taken up.
    put(dir.path(), 5, false, false);
    wait_staged(&catalog, "5.0.0");
    decoder.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(1)).unwrap().batch), ["v5"]);
}

#[test]
fn without_reload_the_first_version_stays() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), 1, false, false);
    let (catalog, _plugin, mut decoder) = watched(dir.path(), None);
    put(dir.path(), 2, false, false);
    std::thread::sleep(Duration::from_millis(300));
    decoder.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(1)).unwrap().batch), ["v1"]);
    assert_eq!(in_use(&catalog).0, "1.0.0");
}

#[test]
fn installing_the_version_in_use_again_drops_a_staged_one() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), 1, false, false);
    let (catalog, _plugin, mut decoder) = watched(dir.path(), Some(Duration::from_millis(100)));
    put(dir.path(), 2, false, false);
    wait_staged(&catalog, "2.0.0");
    put(dir.path(), 1, false, false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while catalog.versions()[0].1.staged.is_some() {
        assert!(Instant::now() < deadline, "2.0.0 still staged");
        std::thread::sleep(Duration::from_millis(20));
    }
    decoder.checkpoint_completed();
    assert_eq!(tags(&decoder.decode(messages(1)).unwrap().batch), ["v1"]);
}
