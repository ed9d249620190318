//! The Pulsar connector's options, declared once.
//!
//! Two generations of the reference connector disagree on spellings (`flushoncheckpoint` in the vendor's
//! document, `flush-on-checkpoint` in the code; `receiverQueueSize` vs `receiver-queue-size`) and accept the
//! connector-level settings under `properties.`. Every connector-level setting here is therefore one
//! [`OptionDecl`] marked [`OptionDecl::pass_through`]: accepted at the top level under any of its spellings
//! *and* as `properties.<spelling>`, looked up there after normalisation (segments compared without `-`/`_`
//! and case-insensitively), so camelCase keys work (the reference lower-cases them and then fails). The
//! option layer resolves them all ([`OPTIONS`]); `super::config` decodes the result once into the typed
//! [`super::config::PulsarTableConfig`].

use std::sync::LazyLock;

use crate::options::{Choices, OptionDecl, OptionKind, OptionSet, PassThrough, Rule};

/// A connector-level setting: accepted at the top level under any of its spellings and as
/// `properties.<spelling>` (compared loosely).
fn setting(
    key: &'static str,
    aliases: &'static [&'static str],
    kind: OptionKind,
    default: Option<&'static str>,
    doc: &'static str,
) -> OptionDecl {
    let d = OptionDecl::new(key, kind, doc)
        .aliases(aliases)
        .pass_through();
    match default {
        Some(v) => d.default(v),
        None => d,
    }
}

const INT_MS: OptionKind = OptionKind::Int {
    min: -1,
    max: i64::MAX,
};
const POSITIVE: OptionKind = OptionKind::Int {
    min: 1,
    max: i64::MAX,
};
/// A consumer's receiver queue: at least one message, at most a million (its memory is per split).
const RECEIVER_QUEUE_SIZE: OptionKind = OptionKind::Int {
    min: 1,
    max: 1_000_000,
};
const NON_NEGATIVE: OptionKind = OptionKind::Int {
    min: 0,
    max: i64::MAX,
};

pub const TOPIC: &str = "topic";
pub const TOPIC_PATTERN: &str = "topic-pattern";
pub const STARTUP_MODE: &str = "scan.startup.mode";
pub const STARTUP_TIMESTAMP: &str = "scan.startup.timestamp-millis";
pub const STARTUP_SUB_NAME: &str = "scan.startup.sub-name";
pub const STARTUP_SUB_START: &str = "scan.startup.sub-start-offset";
pub const STARTUP_SPECIFIC_OFFSETS: &str = "scan.startup.specific-offsets";
pub const STOP_AT_MESSAGE_ID: &str = "source.stop.at-message-id";
pub const STOP_AFTER_MESSAGE_ID: &str = "source.stop.after-message-id";
pub const STOP_AT_PUBLISH_TIME: &str = "source.stop.at-publish-time";
pub const SEMANTIC: &str = "sink.semantic";
pub const DEAD_LETTER: &str = "sink.dead-letter-topic";
pub const ROUTER: &str = "sink.message-router";
pub const DISCOVERY: &str = "partition.discovery.interval-millis";
pub const AUTH_PLUGIN: &str = "auth-plugin-classname";
pub const AUTH_PARAMS: &str = "auth-params";
pub const TLS_TRUST_CERTS: &str = "tls-trust-certs-file-path";
pub const TLS_ALLOW_INSECURE: &str = "tls-allow-insecure-connection";
pub const TLS_HOSTNAME_VERIFICATION: &str = "tls-hostname-verification-enable";
pub const TLS_CERT_FILE: &str = "tls-certificate-file-path";
pub const TLS_KEY_FILE: &str = "tls-key-file-path";
pub const FLUSH_ON_CHECKPOINT: &str = "flush-on-checkpoint";
pub const FAIL_ON_WRITE: &str = "fail-on-write";
pub const POLL_TIMEOUT: &str = "poll-timeout-ms";
pub const COMMIT_RETRIES: &str = "commit-max-retries";
pub const FAIL_ON_DATA_LOSS: &str = "pulsar.reader.fail-on-data-loss";
pub const EARLIEST_ON_DATA_LOSS: &str = "pulsar.reader.use-earliest-when-data-loss";
pub const KEY_HASH_RANGE: &str = "enable-key-hash-range";
pub const SCAN_PARALLELISM: &str = "scan.parallelism";
pub const SINK_PARALLELISM: &str = "sink.parallelism";
pub const SUBSCRIPTION_PREFIX: &str = "pulsar.reader.subscription-role-prefix";
pub const SUBSCRIPTION_TYPE: &str = "subscription-type";
/// Pulsar's subscription types, spelled as `SubscriptionType` (values are case-insensitive).
pub const SUBSCRIPTION_TYPES: &[&str] = &["Exclusive", "Failover", "Shared", "Key_Shared"];
pub const RECEIVER_QUEUE: &str = "pulsar.reader.receiver-queue-size";
pub const SEND_TIMEOUT: &str = "send-timeout-ms";
pub const SEND_DELAY: &str = "send-delay-millisecond";
pub const BLOCK_IF_QUEUE_FULL: &str = "pulsar.producer.block-if-queue-full";
pub const MAX_PENDING: &str = "pulsar.producer.max-pending-messages";
pub const CLIENT_CACHE: &str = "client-cache-size";
pub const TXN_TIMEOUT: &str = "transaction-timeout";
pub const MAX_BLOCK_TIME: &str = "max-block-time-ms";
pub const OPERATION_TIMEOUT: &str = "pulsar.client.operation-timeout-ms";
pub const BATCHING: &str = "pulsar.producer.batching-enabled";
pub const BATCH_MESSAGES: &str = "pulsar.producer.batching-max-messages";
pub const BATCH_BYTES: &str = "pulsar.producer.batching-max-bytes";
pub const BATCH_DELAY: &str = "pulsar.producer.batching-max-publish-delay-micros";
pub const COMPRESSION: &str = "pulsar.producer.compression-type";
pub const PRODUCER_NAME: &str = "pulsar.producer.producer-name";
pub const CHUNKING: &str = "pulsar.producer.chunking-enabled";

/// The largest `scan.parallelism`: key-range readers per split.
pub const MAX_KEY_RANGES: i64 = 1024;

/// `pulsar.producer.compressionType` values (the Java client's `CompressionType` names).
pub const COMPRESSION_TYPES: &[&str] = &["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"];

/// The connector-level settings, in documentation order.
pub static SETTINGS: LazyLock<Vec<OptionDecl>> = LazyLock::new(|| {
    vec![
    setting(
        DISCOVERY,
        &[
            "discovery topic interval",
            "partitiondiscoveryintervalmillis",
        ],
        INT_MS,
        Some("-1"),
        "Interval in ms at which new partitions and new topics matching `topic-pattern` are looked for; -1 disables. Discovered partitions and topics are read from the earliest message.",
    ),
    setting(
            AUTH_PLUGIN,
            &["authPluginClassName", "pulsar.client.authPluginClassName"],
            OptionKind::String,
            None,
            "Authentication: `org.apache.pulsar.client.impl.auth.AuthenticationToken` (or `token`), `org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2` (or `oauth2`: client credentials, the token endpoint found by OpenID discovery, the access token refreshed before it expires), `org.apache.pulsar.client.impl.auth.AuthenticationTls` (or `tls`: the TLS client certificate of `auth-params`; the broker takes the role from it; needs `pulsar+ssl://`). Other plugins are refused with a clear error.",
    ),
    setting(
            AUTH_PARAMS,
            &["authParams", "pulsar.client.authParams"],
            OptionKind::String,
            None,
            "Authentication parameters. Token: `token:<jwt>`, `file:///path/to/token`, or the bare token. OAuth2: the Java client's JSON, `{\"type\":\"client_credentials\",\"issuerUrl\":\"https://idp/\",\"privateKey\":\"file:///path/key.json\",\"audience\":\"...\",\"scope\":\"...\"}` (`privateKey` also `data:application/json;base64,...`; the key file holds `client_id` and `client_secret`). TLS: `tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem` or `{\"tlsCertFile\":\"...\",\"tlsKeyFile\":\"...\"}` (PEM chain; PEM key, PKCS#8, PKCS#1 or SEC1, read when the job starts and checked to belong to the certificate; also presented by the transaction coordinator and admin clients). Never printed.",
    )
    .secret(),
    setting(
        TLS_TRUST_CERTS,
        &[
            "tlsTrustCertsFilePath",
            "pulsar.client.tlsTrustCertsFilePath",
        ],
        OptionKind::String,
        None,
        "TLS (`pulsar+ssl://`, `https://` admin URL): PEM file of the CA certificates the broker's certificate must chain to (the broker connection trusts only these; the admin client and the OAuth2 issuer trust them besides the system's). Unset: the system's trust store. Read when the job starts; a missing or unreadable file is an error. Ignored (with a warning) when no URL of the table uses TLS.",
    ),
    setting(
        TLS_ALLOW_INSECURE,
        &[
            "tlsAllowInsecureConnection",
            "pulsar.client.tlsAllowInsecureConnection",
        ],
        OptionKind::Bool,
        Some("false"),
        "TLS: accept any broker certificate (no chain or host name check). Insecure: for test brokers only.",
    ),
    setting(
        TLS_HOSTNAME_VERIFICATION,
        &[
            "tlsHostnameVerificationEnable",
            "pulsar.client.tlsHostnameVerificationEnable",
        ],
        OptionKind::Bool,
        Some("true"),
        "TLS: check that the broker's certificate names the host of the service URL. On by default (the Java client's default is off); `false` keeps the chain check and needs `tls-trust-certs-file-path`. The admin client always checks the host name unless `tls-allow-insecure-connection` is set.",
    ),
    setting(
        TLS_CERT_FILE,
        &[
            "tlsCertificateFilePath",
            "pulsar.client.tlsCertificateFilePath",
        ],
        OptionKind::String,
        None,
        "TLS: PEM file of the client certificate (chain) presented to brokers (binary protocol, transaction coordinator, `https://` admin URL) that ask for one, whatever the authentication; with `tls-key-file-path`. `AuthenticationTls`'s `tlsCertFile` wins over it. Read when the job starts; ignored (with a warning) when no URL of the table uses TLS.",
    ),
    setting(
            TLS_KEY_FILE,
            &["tlsKeyFilePath", "pulsar.client.tlsKeyFilePath"],
            OptionKind::String,
            None,
            "TLS: PEM file of the private key of `tls-certificate-file-path` (PKCS#8, PKCS#1 or SEC1), checked to belong to the certificate. Neither its path nor its content is printed.",
    )
    .secret(),
    setting(
        FLUSH_ON_CHECKPOINT,
        &["flushoncheckpoint"],
        OptionKind::Bool,
        Some("true"),
        "Sink: at every checkpoint wait until every sent message is acknowledged by the broker. `false` only flushes the producer (at-least-once still holds for acknowledged sends, not for sends in flight).",
    ),
    setting(
        FAIL_ON_WRITE,
        &["failonwrite"],
        OptionKind::Bool,
        Some("true"),
        "Sink: a failed send fails the job. `false`: the row is logged, counted (`pulsar_connect_sink_dropped_total`) and written to `sink.dead-letter-topic` when set — never silently lost.",
    ),
    setting(
        POLL_TIMEOUT,
        &["polltimeoutms"],
        POSITIVE,
        Some("120000"),
        "Source: accepted for compatibility. Reading never times out (an idle topic is fine); the value bounds one receive call.",
    ),
    setting(
        COMMIT_RETRIES,
        &["commitmaxretries"],
        NON_NEGATIVE,
        Some("3"),
        "Source: extra attempts (1 s apart) to commit a completed checkpoint's position to the subscription. A final failure is logged and counted; it never fails the job (the checkpoint itself holds the position).",
    ),
    setting(
        FAIL_ON_DATA_LOSS,
        &["pulsar.reader.failOnDataLoss", "failondataloss"],
        OptionKind::Bool,
        Some("true"),
        "Source: fail when the position to resume from is beyond the end of the topic (truncated, deleted or recreated topic).",
    ),
    setting(
        EARLIEST_ON_DATA_LOSS,
        &["pulsar.reader.useEarliestWhenDataLoss"],
        OptionKind::Bool,
        Some("false"),
        "Source: with `fail-on-data-loss` false, resume from the earliest available message (logged).",
    ),
    setting(
        KEY_HASH_RANGE,
        &["enablekeyhashrange"],
        OptionKind::Bool,
        Some("false"),
        "Source: read every split through `scan.parallelism` readers, each owning an even share of the key hash space [0, 65535] (Pulsar Key_Shared sticky ranges on non-durable subscriptions, as the reference's range readers); every message is read by exactly one of them, in order per key (Key_Shared dispatches a batch by its first key: producers must batch by key, as Pulsar requires for Key_Shared). Positions are checkpointed per split and range; nothing is committed to a subscription, and exactly-once sinks keep their positions in the checkpoint (not in the transaction).",
    ),
    setting(
        SCAN_PARALLELISM,
        &["scan-parallelism"],
        OptionKind::Int { min: 1, max: MAX_KEY_RANGES },
        None,
        "Source: how many subtasks read the table (unset: the job's `parallelism.default`, else as many as the process has cores, capped by the number of splits); each owns a stable share of the splits (topic partitions and key ranges) and keeps their order. With `enable-key-hash-range` also how many key-range readers read each split (unset: 1).",
    ),
    setting(
        SUBSCRIPTION_PREFIX,
        &[
            "pulsar.reader.subscriptionRolePrefix",
            "subscriptionroleprefix",
        ],
        OptionKind::String,
        Some("pulsar-connect"),
        "Source: prefix of the job's durable subscriptions, named `<prefix>-<job id>-<INSERT>-<table>`: `<INSERT>` is `<n>:<sink table>` of the INSERT reading the table (`n` counts INSERTs from 0), `<table>` the table read, e.g. `pulsar-connect-orders-0:out-src`; `pulsar-connect subscriptions` lists them. Not used with `external-subscription`, which reads through the named subscription.",
    ),
    setting(
        SUBSCRIPTION_TYPE,
        &["source.subscription-type", "pulsar.source.subscriptionType"],
        OptionKind::Enum(Choices::Static(SUBSCRIPTION_TYPES)),
        Some("Exclusive"),
        "Source: the type of the job's subscriptions. `Exclusive`: one process reads the job (a second one running the same job is refused by the broker); positions are the checkpoint's. `Failover`: every process running the same job file (same `pipeline.name`, hence the same subscriptions) subscribes to every partition and the broker makes one of them active per partition; when a process dies its partitions move to the others, which resume **at the subscription's cursor** — with `Failover` the cursor, moved at every completed checkpoint by acknowledging the entries it wrote one by one, is where every start resumes (a local checkpoint never rewinds a partition another process moved on), so at-least-once holds across processes (rows a dead or failed process had not written are read again by the partition's new owner, possibly after newer ones of the partition: ADR 0014); with an exactly-once Pulsar sink the messages are acknowledged one by one inside its transactions instead, so exactly-once holds across processes (a process whose acknowledgement conflicts because the partition moved while it held the messages aborts that transaction and restarts itself from the cursor). `Shared` / `Key_Shared`: every process's consumer gets messages (any, or every key to one consumer at a time, in order per key), so there may be more processes than partitions; positions are acknowledgements of each message (entry) read, sent when a checkpoint completes — or, with an exactly-once Pulsar sink, inside its transaction, so exactly-once holds across processes (with an `admin-url` the survivors abort the open transaction of a process that died within seconds, ADR 0023; without one it releases its messages at `transaction-timeout`). Every non-Exclusive type needs `scan.startup.mode` `earliest`, `latest` or `external-subscription` (a seek would move every process's position) and no `enable-key-hash-range`.",
    ),
    setting(
        RECEIVER_QUEUE,
        &["pulsar.reader.receiverQueueSize"],
        RECEIVER_QUEUE_SIZE,
        None,
        "Source: messages prefetched per split (the consumer's receiver queue; every message of a batched entry counts). Unset: 10 000 shared by the splits a source subtask reads, at least 2 000 and at most 5 000 per split. Larger queues keep more entries in flight from the broker, at the cost of memory per split.",
    ),
    setting(
        SEND_TIMEOUT,
        &[
            "pulsar.producer.sendTimeoutMs",
            "pulsar.producer.send-timeout-ms",
        ],
        POSITIVE,
        Some("30000"),
        "Sink: a send not acknowledged within this many ms fails.",
    ),
    setting(
        SEND_DELAY,
        &["senddelaymillisecond"],
        NON_NEGATIVE,
        Some("0"),
        "Sink: delayed delivery in ms (`deliverAfter`; effective for Shared subscribers only).",
    ),
    setting(
        BLOCK_IF_QUEUE_FULL,
        &["pulsar.producer.blockIfQueueFull"],
        OptionKind::Bool,
        Some("true"),
        "Sink: accepted; the sink always applies backpressure when `max-pending-messages` sends are in flight (never a queue-full error).",
    ),
    setting(
        MAX_PENDING,
        &["pulsar.producer.maxPendingMessages"],
        POSITIVE,
        Some("10000"),
        "Sink: sends in flight per table topic (all its partitions together) before the sink waits for acknowledgements.",
    ),
    setting(
        CLIENT_CACHE,
        &["clientcachesize"],
        POSITIVE,
        Some("100"),
        "Accepted for compatibility; no effect (one client per table).",
    ),
    setting(
        TXN_TIMEOUT,
        &["transactiontimeout"],
        OptionKind::Duration,
        Some("1h"),
        "Sink, exactly-once: transaction timeout; must exceed the checkpoint interval plus the commit time.",
    ),
    setting(
        MAX_BLOCK_TIME,
        &["maxblocktimems"],
        POSITIVE,
        Some("100000"),
        "Sink, exactly-once: how long a commit may wait for the coordinator, in ms.",
    ),
    setting(
        OPERATION_TIMEOUT,
        &["pulsar.client.operationTimeoutMs"],
        POSITIVE,
        Some("30000"),
        "Deadline of one client operation (lookup, subscribe, create producer), in ms.",
    ),
    setting(
        BATCHING,
        &["pulsar.producer.batchingEnabled"],
        OptionKind::Bool,
        Some("true"),
        "Sink: group messages into batches (one broker entry per batch).",
    ),
    setting(
        BATCH_MESSAGES,
        &["pulsar.producer.batchingMaxMessages"],
        POSITIVE,
        Some("1000"),
        "Sink: messages per batch at most (an exactly-once sink whose table sets neither this nor `batching-max-bytes`: 5000).",
    ),
    setting(
        BATCH_BYTES,
        &["pulsar.producer.batchingMaxBytes"],
        POSITIVE,
        Some("131072"),
        "Sink: bytes per batch at most (an exactly-once sink whose table sets neither this nor `batching-max-messages`: 1048576).",
    ),
    setting(
        BATCH_DELAY,
        &["pulsar.producer.batchingMaxPublishDelayMicros"],
        POSITIVE,
        Some("5000"),
        "Sink: how long a batch waits for more messages before it is sent, in µs, while more rows keep arriving; a batch is sent at once when the sink has no more rows waiting (so at moderate rates messages do not wait for this delay).",
    ),
    setting(
        COMPRESSION,
        &["pulsar.producer.compressionType"],
        OptionKind::Enum(Choices::Static(COMPRESSION_TYPES)),
        Some("NONE"),
        "Sink: payload compression. With batching each batch is compressed as a whole (as the Java client does); a message sent alone is compressed by itself.",
    ),
    setting(
        CHUNKING,
        &["pulsar.producer.chunkingEnabled"],
        OptionKind::Bool,
        Some("false"),
        "Sink: a message above the broker's `maxMessageSize` (5 MB by default) is sent in chunks that every Pulsar client reads back whole (off: such a row fails its send, naming the table). Messages that fit are batched as usual; a chunked one is sent alone.",
    ),
    setting(
        PRODUCER_NAME,
        &["pulsar.producer.producerName"],
        OptionKind::String,
        None,
        "Sink: producer name (the same on every partition; unset: the broker assigns unique names). With broker deduplication a named producer continues from the last sequence id the broker stored for it, so a restarted job's sends are not dropped as duplicates. Two running producers cannot share a name.",
    ),
    ]
});

pub const STARTUP_MODES: &[&str] = &[
    "earliest",
    "latest",
    "specific-offsets",
    "external-subscription",
    "timestamp",
];

fn top_level_decls() -> Vec<OptionDecl> {
    let mut v = vec![
        OptionDecl::string("service-url", "Pulsar service URL, `pulsar://host:6650`, or `pulsar+ssl://host:6651` for TLS (see the `tls-*` options).").required(),
        OptionDecl::string(
            "admin-url",
            "Pulsar admin URL, `http://host:8080` or `https://host:8443`. Optional: without it `specific-offsets`, `external-subscription` and `timestamp` still work over the binary protocol, and topic patterns are listed over the binary protocol.",
        ),
        OptionDecl::string(
            "topic",
            "Topic(s): one, or a list separated by `,` or `;`. Short names mean `persistent://public/default/<name>`. A sink writes to exactly one topic.",
        )
        .aliases(&["topics"])
        .pass_through(),
        OptionDecl::string(
            "topic-pattern",
            "Source: regular expression over the full topic names of one namespace (`persistent://tenant/ns/orders-.*`).",
        )
        .aliases(&["topicspattern"])
        .pass_through(),
        OptionDecl::enumeration(STARTUP_MODE, STARTUP_MODES, "Source: where reading starts on a fresh start (a restore resumes after the last emitted message). `latest` = messages published after the job starts.").default("latest"),
        OptionDecl::string(
            "scan.startup.specific-offsets",
            "Source, `specific-offsets`: `ledger:entry:partition[:batch]` entries separated by `;` (inclusive), optionally topic-qualified as `<topic>@ledger:entry:partition`. Partitions without an entry start at earliest.",
        )
        .hint("(e.g. '42:1012:0;44:1011:1')"),
        OptionDecl::string("scan.startup.sub-name", "Source, `external-subscription`: the subscription whose cursor is the start position."),
        OptionDecl::enumeration(
            "scan.startup.sub-start-offset",
            &["earliest", "latest"],
            "Source, `external-subscription`: where a subscription that does not exist yet is created.",
        )
        .default("latest"),
        OptionDecl::int("scan.startup.timestamp-millis", 0, i64::MAX, "Source, `timestamp`: first publish time to read, ms since the epoch.").hint("(ms since the epoch)"),
        OptionDecl::string(
            STOP_AT_MESSAGE_ID,
            "Source, bounded: read each partition up to this message id, excluded (`ledger:entry:partition`, compared with every message id as the Java client compares them: ledger, entry, partition, batch index), then end; `latest`: up to each partition's last message when its reader opens, included; `never` (the default): unbounded. A partition whose last message lies before the cursor ends there, and an empty one at once. When every source of an INSERT has ended, the job takes a final checkpoint and `run` exits 0 (docs/bounded.md).",
        )
        .hint("('never', 'latest' or 'ledger:entry:partition')"),
        OptionDecl::string(
            STOP_AFTER_MESSAGE_ID,
            "Source, bounded: read each partition up to this message id, included (`ledger:entry:partition`), then end (see `source.stop.at-message-id`).",
        )
        .hint("('ledger:entry:partition')"),
        OptionDecl::int(
            STOP_AT_PUBLISH_TIME,
            0,
            i64::MAX,
            "Source, bounded: read each partition up to the first message published at or after this time (ms since the epoch), excluded, then end; a time already past also ends each partition at its last message when its reader opens.",
        )
        .hint("(ms since the epoch)"),
        OptionDecl::string("format", "Format plugin of the message value (`json`, `avro`, `csv`, `raw` or a plugin of the plugin directory).").aliases(&["value.format"]),
        OptionDecl::string("key.format", "Format plugin of the message key; requires `key.fields`."),
        OptionDecl::string("key.fields", "Physical columns in the message key, separated by `;` or `,`; requires `key.format`."),
        OptionDecl::string("key.fields-prefix", "Prefix of the key columns' names, stripped in the key format; requires `value.fields-include` = `EXCEPT_KEY`."),
        OptionDecl::enumeration("value.fields-include", &["ALL", "EXCEPT_KEY"], "Whether the value carries the key columns too.").default("ALL"),
        OptionDecl::string("sink.message-router", "Sink: router plugin (`key-hash`, `round-robin` or a router of the plugin directory); unset = Pulsar's default routing (`round-robin`). Router options: `sink.message-router.<option>`."),
        OptionDecl::string("sink.message-router.*", "Options passed to the router plugin."),
        OptionDecl::enumeration("sink.semantic", &["at-least-once", "exactly-once", "none"], "Sink delivery guarantee. `exactly-once`: a Pulsar transaction per checkpoint (readers see rows when the checkpoint completes); when the INSERT reads a Pulsar table with `admin-url`, the source's acknowledgements go into the same transaction, so the job resumes exactly where its committed output ends even without its state directory (docs/adr/0008).").default("at-least-once"),
        OptionDecl::string("sink.dead-letter-topic", "Sink, `fail-on-write` = false: topic receiving the rows whose send failed (payload, key and properties kept, plus `pulsar-connect.error`)."),
        OptionDecl::int(SINK_PARALLELISM, 1, crate::connector_api::settings::MAX_PARALLELISM, "Sink: how many subtasks write the table, each with its own producers (and, exactly-once, its own transaction per checkpoint); unset: the job's `parallelism.default`, else as many as the source has. At most the source's number: a source subtask feeds one sink subtask, which keeps each partition's rows in order. A producer name (`sink.producer-name`) gets the subtask's index appended when there are several."),
        OptionDecl::boolean("generic", "StreamNative/InLong: marks a table of StreamNative's Pulsar catalog as a generic Flink table (set by their SQL examples). Accepted for compatibility; no effect here (every table is declared by its DDL)."),
        OptionDecl::string("inlong.metric.labels", "InLong's metric labels, `groupId=..&streamId=..&nodeId=..` (`key=value` pairs joined by `&`): added to every metric series of the table; a `pulsar-inlong` table also reports InLong's metric names (`pulsar_connect_inlong_numRecordsIn`, ...; docs/cli.md)."),
        OptionDecl::string("metrics.audit.key", "InLong: accepted, not used."),
        OptionDecl::string("metrics.audit.proxy.hosts", "InLong: accepted, not used."),
        OptionDecl::string(
            "properties.*",
            "Connector settings (any spelling listed here, camelCase or hyphenated, e.g. `properties.pulsar.reader.receiverQueueSize`) and `properties.topic`/`topics`/`topicspattern`. Other `pulsar.reader.*`, `pulsar.producer.*`, `pulsar.client.*` keys are accepted and not applied (logged at start).",
        ),
    ];
    v.extend(SETTINGS.iter().cloned());
    v
}

pub static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'pulsar'",
        "Source and sink (also registered as `pulsar-inlong`). Format options are the format's own, prefixed with the format name (`json.ignore-parse-errors`) or `key.<format>.` for the key format; they are checked against the plugin's manifest. A changelog value format (`debezium-json`, `canal-json`, `maxwell-json`) reads and writes updates and deletes, and its readable metadata is `METADATA FROM 'value.<key>'`. The same options serve `upsert-pulsar` (also `upsert-pulsar-inlong`): a table keyed by its `PRIMARY KEY (..) NOT ENFORCED`, which is the message key (`key.format` required, insert-only `key.format` and `value.format`, no `key.fields`, one `topic`); its source reads from the earliest message, a message with a value is an upsert (`+U`) and a tombstone (no value) a delete (`-D`) of its key; its sink writes `+I`/`+U` as key and value, `-D` as a tombstone with the key, drops `-U`, and routes with `key-hash` (no `scan.startup.*`, no other `sink.message-router`).",
        top_level_decls(),
        vec![
            Rule::MutuallyExclusive(TOPIC, TOPIC_PATTERN),
            Rule::OneOf(&[TOPIC, TOPIC_PATTERN]),
            Rule::MutuallyExclusive(STOP_AT_MESSAGE_ID, STOP_AFTER_MESSAGE_ID),
            Rule::MutuallyExclusive(STOP_AT_MESSAGE_ID, STOP_AT_PUBLISH_TIME),
            Rule::MutuallyExclusive(STOP_AFTER_MESSAGE_ID, STOP_AT_PUBLISH_TIME),
            Rule::RequiredWhen {
                option: STARTUP_MODE,
                equals: "timestamp",
                requires: STARTUP_TIMESTAMP,
            },
            Rule::RequiredWhen {
                option: STARTUP_MODE,
                equals: "external-subscription",
                requires: STARTUP_SUB_NAME,
            },
            Rule::RequiredWhen {
                option: STARTUP_MODE,
                equals: "specific-offsets",
                requires: STARTUP_SPECIFIC_OFFSETS,
            },
        ],
    )
    .with_pass_through(PassThrough {
        prefix: "properties.",
        accepted: &["pulsar.reader.", "pulsar.producer.", "pulsar.client.", "pulsar.admin."],
        what: "connector setting",
        note: "`pulsar.reader.*`, `pulsar.producer.*` and `pulsar.client.*` keys are accepted and not applied",
    })
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Pos;

    fn resolve(pairs: &[(&str, &str)]) -> Result<crate::options::ResolvedOptions, String> {
        let mut raw: Vec<(String, String, Pos)> = vec![
            ("service-url".into(), "pulsar://x".into(), Pos::default()),
            ("topic".into(), "t".into(), Pos::default()),
        ];
        raw.extend(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string(), Pos::default())),
        );
        OPTIONS.validate("t", &raw, &[]).map_err(|es| {
            es.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    #[test]
    fn settings_under_properties_in_any_spelling() {
        let o = resolve(&[("properties.pulsar.reader.receiverQueueSize", "7")]).unwrap();
        assert_eq!(o.int(RECEIVER_QUEUE), Some(7));
        let o = resolve(&[("properties.pulsar.reader.failOnDataLoss", "FALSE")]).unwrap();
        assert_eq!(o.bool(FAIL_ON_DATA_LOSS), Some(false));
        let o = resolve(&[("properties.discovery topic interval", "5")]).unwrap();
        assert_eq!(o.int(DISCOVERY), Some(5));
        // The top level wins over `properties.`.
        let o = resolve(&[
            ("pulsar.reader.receiver-queue-size", "3"),
            ("properties.pulsar.reader.receiverQueueSize", "9"),
        ])
        .unwrap();
        assert_eq!(o.int(RECEIVER_QUEUE), Some(3));
        let o = resolve(&[("properties.pulsar.reader.readerName", "r")]).unwrap();
        assert_eq!(o.passed_through(), ["properties.pulsar.reader.readerName"]);
        let e = resolve(&[("properties.nope", "x")]).unwrap_err();
        assert!(
            e.contains("option 'properties.nope': unknown connector setting"),
            "{e}"
        );
        let e = resolve(&[
            ("properties.pulsar.reader.receiverQueueSize", "7"),
            ("properties.pulsar.reader.receiver-queue-size", "8"),
        ])
        .unwrap_err();
        assert!(e.contains("set twice under `properties.`"), "{e}");
    }

    #[test]
    fn defaults_are_typed_and_stated_once() {
        let o = resolve(&[]).unwrap();
        assert_eq!(
            o.duration(TXN_TIMEOUT),
            Some(std::time::Duration::from_secs(3600))
        );
        assert_eq!(o.text(SUBSCRIPTION_PREFIX), Some("pulsar-connect"));
        assert_eq!(o.text(STARTUP_MODE), Some("latest"));
    }
}
