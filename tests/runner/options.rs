//! Option errors, each kind, through whole job files; secret redaction; docs/options.md is current.

use crate::common;

use common::errors;

fn fake(opts: &str) -> String {
    format!(
        "CREATE TABLE src (a INT) WITH ('connector' = 'fake-pulsar', {opts});\nCREATE TABLE out (a INT) WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT a FROM src;"
    )
}

#[tokio::test]
async fn unknown_option_suggests_the_nearest_name() {
    let e = errors(&fake(
        "'service-url' = 'pulsar://x', 'scan.startup.mod' = 'earliest'",
    ))
    .await;
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("table 'src', option 'scan.startup.mod'")
            && e[0].contains("did you mean 'scan.startup.mode'"),
        "{}",
        e[0]
    );
    assert!(e[0].starts_with("line 1, column "), "{}", e[0]);
    let e = errors("CREATE TABLE p (a INT) WITH ('connector' = 'print', 'print-identifer' = 'x');")
        .await;
    assert!(e[0].contains("did you mean 'print-identifier'"), "{}", e[0]);
    let e = errors(
        "CREATE TABLE g (id INT) WITH ('connector' = 'datagen', 'fields.idd.kind' = 'sequence');",
    )
    .await;
    assert!(
        e[0].contains("'idd' is not a column") && e[0].contains("fields.id.kind"),
        "{}",
        e[0]
    );
}

#[tokio::test]
async fn bad_enum_value_lists_the_allowed_values() {
    let e = errors(&fake(
        "'service-url' = 'x', 'scan.startup.mode' = 'earlist'",
    ))
    .await;
    assert!(
        e[0].contains("option 'scan.startup.mode'")
            && e[0].contains("did you mean 'earliest'?")
            && e[0].contains(
                "allowed values: earliest, latest, external-subscription, specific-offsets"
            ),
        "{}",
        e[0]
    );
}

/// As in Flink, enum and boolean values are case-insensitive (`'EARLIEST'`, `'TRUE'`), host and plugin
/// options alike, and every bad option of a table is reported at once.
#[tokio::test]
async fn values_are_case_insensitive_and_every_error_is_reported() {
    let e = errors(&fake(
        "'service-url' = 'x', 'scan.startup.mode' = 'EARLIEST', 'scan.startup.mod' = 'latest', 'discovery topic interval' = 'soon'",
    ))
    .await;
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("'scan.startup.mod'"), "{}", e[0]);
    assert!(
        e[1].contains("'discovery topic interval'") && e[1].contains("not a valid integer"),
        "{}",
        e[1]
    );
    let (r, _) = common::registry();
    let ok = fake("'service-url' = 'x', 'scan.startup.mode' = 'Specific-Offsets', 'topic' = 't'");
    if let Err(e) = pulsar_connect::job::load_text(&ok, &r).await {
        panic!("refused: {e}");
    }
}

#[tokio::test]
async fn missing_required_option() {
    let e = errors(&fake("'topic' = 't'")).await;
    assert!(
        e[0].contains("table 'src', option 'service-url'") && e[0].contains("required"),
        "{}",
        e[0]
    );
    let e = errors(&fake(
        "'service-url' = 'x', 'scan.startup.mode' = 'external-subscription'",
    ))
    .await;
    assert!(
        e[0].contains("option 'scan.startup.sub-name'")
            && e[0].contains("required when 'scan.startup.mode' = 'external-subscription'"),
        "{}",
        e[0]
    );
}

#[tokio::test]
async fn mutually_exclusive_options() {
    let e = errors(&fake(
        "'service-url' = 'x', 'topic' = 't', 'topic-pattern' = 'p.*'",
    ))
    .await;
    assert!(
        e[0].contains("'topic' and 'topic-pattern' are mutually exclusive"),
        "{}",
        e[0]
    );
    // An alias and its canonical name together are the same option set twice.
    let e = errors(&fake("'service-url' = 'x', 'discovery topic interval' = '5', 'partition.discovery.interval-millis' = '6'")).await;
    assert!(e[0].contains("set twice"), "{}", e[0]);
}

#[tokio::test]
async fn bad_numbers() {
    let e = errors(
        "CREATE TABLE g (id INT) WITH ('connector' = 'datagen', 'rows-per-second' = 'fast');",
    )
    .await;
    assert!(
        e[0].contains("option 'rows-per-second'") && e[0].contains("'fast' is not a valid integer"),
        "{}",
        e[0]
    );
    let e = errors(
        "CREATE TABLE p (a INT) WITH ('connector' = 'print', 'print-sample-ratio' = '1.5');",
    )
    .await;
    assert!(
        e[0].contains("option 'print-sample-ratio'") && e[0].contains("out of range"),
        "{}",
        e[0]
    );
    let e = errors("CREATE TABLE g (id INT) WITH ('connector' = 'datagen', 'fields.id.min' = '10', 'fields.id.max' = '1');").await;
    assert!(
        e[0].contains("fields.id.min") && e[0].contains("greater than"),
        "{}",
        e[0]
    );
    let e = errors("SET 'execution.checkpointing.interval' = 'often';\nCREATE TABLE g (id INT) WITH ('connector' = 'datagen');").await;
    assert!(
        e[0].contains("execution.checkpointing.interval") && e[0].contains("not a duration"),
        "{}",
        e[0]
    );
}

#[tokio::test]
async fn all_table_errors_are_reported_together() {
    let e = errors("CREATE TABLE a (x INT) WITH ('connector' = 'nope');\nCREATE TABLE b (x INT) WITH ('connector' = 'print', 'standard-error' = 'maybe');").await;
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("unknown connector 'nope'"), "{}", e[0]);
    assert!(
        e[1].contains("line 2") && e[1].contains("'maybe' is not a boolean"),
        "{}",
        e[1]
    );
}

#[tokio::test]
async fn secrets_are_redacted_in_validate_output() {
    let (r, _) = common::registry();
    for s in ["SECRET1", "SECRET2", "SECRET3"] {
        pulsar_connect_tests::secret(s);
    }
    let job = pulsar_connect::job::load_text(
        &fake("'service-url' = 'x', 'auth-params' = 'token:SECRET1', 'properties.auth-params' = 'token:SECRET2', 'properties.password' = 'SECRET3'"),
        &r,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let text = pulsar_connect::job::describe(&job);
    assert!(!text.contains("SECRET"), "{text}");
    assert!(
        text.contains("option auth-params = '******'")
            && text.contains("option properties.password = '******'"),
        "{text}"
    );
    assert!(text.contains("option service-url = 'x'"), "{text}");
}

/// Regenerate with `UPDATE_DOCS=1 cargo test --release -p pulsar-connect-tests --test runner options::` or
/// `pulsar-connect docs options > docs/options.md`.
#[test]
fn docs_options_md_is_current() {
    let expected =
        pulsar_connect::job::options_markdown(&pulsar_connect::connector_api::Registry::builtin());
    let path = common::workspace().join("docs/options.md");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/options.md is stale: run `pulsar-connect docs options > docs/options.md` (or UPDATE_DOCS=1 with this test)"
    );
}
