//! How the source task cuts batches (adaptive, fixed linger, none), that it reads only once the sinks
//! opened, and when the sink is told its input ran dry. Counted by batch composition, not by time.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use tokio::sync::{mpsc, watch};

use super::*;

fn rows(n: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1_i64; n]))]).unwrap()
}

/// Returns its script's batches at once, each followed by whether more is buffered; then waits forever.
struct Scripted {
    script: VecDeque<(usize, bool)>,
    buffered: bool,
}

#[async_trait]
impl Source for Scripted {
    fn restore(&mut self, _: serde_json::Value) -> Result<()> {
        Ok(())
    }
    async fn poll_batch(&mut self, _max: usize) -> Result<SourcePoll> {
        match self.script.pop_front() {
            Some((n, more)) => {
                self.buffered = more;
                Ok(SourcePoll::Batch(rows(n)))
            }
            None => std::future::pending().await,
        }
    }
    fn has_buffered(&self) -> bool {
        self.buffered
    }
    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
}

/// The sizes of the batches the source task hands on for `script`, until all its rows came out.
async fn handed_on(
    script: &[(usize, bool)],
    linger: Option<Duration>,
    batch_size: usize,
) -> Vec<usize> {
    let total: usize = script.iter().map(|(n, _)| n).sum();
    let (out_tx, mut out) = mpsc::channel(16);
    let (_cmd_tx, cmds) = mpsc::channel(4);
    let (ev_tx, _ev) = mpsc::channel(4);
    let (_opened, sinks_opened) = watch::channel(1);
    let stage = SourceStage {
        idx: 0,
        batch_size,
        linger,
        metrics: super::super::telemetry::Metrics::new().unwrap(),
        table: "t".into(),
        sinks_opened,
        sinks: 1,
    };
    let source = Box::new(Scripted {
        script: script.iter().copied().collect(),
        buffered: false,
    });
    let task = tokio::spawn(source_task(stage, source, out_tx, cmds, ev_tx));
    let mut sizes = Vec::new();
    while sizes.iter().sum::<usize>() < total {
        match out.recv().await {
            Some(Msg::Batch(b)) => sizes.push(b.num_rows()),
            Some(_) => {}
            None => break,
        }
    }
    task.abort();
    sizes
}

const SCRIPT: &[(usize, bool)] = &[
    (3, true),
    (2, false),
    (4, false),
    (1, true),
    (1, true),
    (1, false),
];

#[tokio::test]
async fn adaptive_hand_off_batches_only_while_more_is_buffered() {
    assert_eq!(handed_on(SCRIPT, None, 4096).await, vec![5, 4, 3]);
    // A full batch goes at once, buffered or not.
    assert_eq!(
        handed_on(&[(3, true), (3, true), (3, false)], None, 6).await,
        vec![6, 3]
    );
}

#[tokio::test]
async fn zero_linger_hands_on_every_poll_and_a_long_one_fills_batches() {
    assert_eq!(
        handed_on(SCRIPT, Some(Duration::ZERO), 4096).await,
        vec![3, 2, 4, 1, 1, 1]
    );
    assert_eq!(
        handed_on(SCRIPT, Some(Duration::from_secs(3600)), 3).await,
        vec![3, 6, 3]
    );
}

/// Records writes and idle calls.
struct Recording(Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Sink for Recording {
    async fn write(&mut self, b: RecordBatch) -> Result<()> {
        self.0
            .lock()
            .unwrap()
            .push(format!("write {}", b.num_rows()));
        Ok(())
    }
    async fn input_idle(&mut self) -> Result<()> {
        self.0.lock().unwrap().push("idle".into());
        Ok(())
    }
    async fn flush(&mut self, _: u64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    async fn close(&mut self) -> Result<()> {
        self.0.lock().unwrap().push("close".into());
        Ok(())
    }
}

#[tokio::test]
async fn the_sink_is_told_when_its_input_ran_dry() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, input) = mpsc::channel(8);
    let (_cmd_tx, cmds) = mpsc::channel(4);
    let (ev_tx, mut ev) = mpsc::channel(4);
    // Two batches waiting when the sink starts, then one more after it went idle.
    for n in [2, 3] {
        tx.send(Msg::Batch(rows(n))).await.unwrap();
    }
    let metrics = super::super::telemetry::Metrics::new().unwrap();
    let sink = Box::new(Recording(log.clone()));
    let (opened, mut sinks_opened) = watch::channel(0);
    let stage = SinkStage {
        idx: 0,
        inputs: vec![(0, input)],
        opened: Arc::new(opened),
        metrics,
        table: "t".into(),
    };
    let task = tokio::spawn(sink_task(stage, sink, cmds, ev_tx));
    sinks_opened.wait_for(|n| *n == 1).await.unwrap();
    while log.lock().unwrap().len() < 3 {
        tokio::task::yield_now().await;
    }
    tx.send(Msg::Batch(rows(4))).await.unwrap();
    tx.send(Msg::End).await.unwrap();
    assert!(matches!(ev.recv().await, Some(Event::Finished(0))));
    task.await.unwrap().unwrap();
    // `End` may or may not already be queued after the third write.
    let log = log.lock().unwrap().clone();
    assert_eq!(&log[..3], ["write 2", "write 3", "idle"], "{log:?}");
    assert_eq!(log[3], "write 4");
    assert_eq!(log.last().unwrap(), "close");
}

#[tokio::test]
async fn a_source_reads_only_once_every_sink_subtask_opened() {
    let (out_tx, mut out) = mpsc::channel(16);
    let (_cmd_tx, cmds) = mpsc::channel(4);
    let (ev_tx, _ev) = mpsc::channel(4);
    let (opened, sinks_opened) = watch::channel(0);
    let stage = SourceStage {
        idx: 0,
        batch_size: 4096,
        linger: None,
        metrics: super::super::telemetry::Metrics::new().unwrap(),
        table: "t".into(),
        sinks_opened,
        sinks: 2,
    };
    let source = Box::new(Scripted {
        script: [(3, false)].into_iter().collect(),
        buffered: false,
    });
    let task = tokio::spawn(source_task(stage, source, out_tx, cmds, ev_tx));
    opened.send_modify(|n| *n += 1);
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(
        out.try_recv().is_err(),
        "read before the second sink opened"
    );
    opened.send_modify(|n| *n += 1);
    assert!(matches!(out.recv().await, Some(Msg::Batch(b)) if b.num_rows() == 3));
    task.abort();
}
