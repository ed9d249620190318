//! A sink subtask's inputs — one channel per source subtask that feeds it — and the alignment of their
//! checkpoint barriers (docs/adr/0015). When an input delivers checkpoint `id`'s barrier it is blocked (its
//! rows after the barrier belong to the next checkpoint) until every other input delivered the same
//! barrier or ended; then the sink flushes and acknowledges once, with every input's source state. A
//! barrier of a newer checkpoint abandons an alignment still waiting (a trigger that never reached one
//! source, a checkpoint the coordinator timed out), and barriers of abandoned or completed checkpoints
//! are dropped, so a lost barrier never stalls the other inputs for good.

use std::task::Poll;

use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

/// What a sink subtask's input channel carries from a source subtask: rows, a checkpoint barrier (its id
/// and the source's snapshot), the end of the input.
pub(super) enum Msg {
    Batch(RecordBatch),
    Barrier(u64, serde_json::Value),
    End,
}

struct Input {
    /// The source subtask's index within its pipeline.
    source: usize,
    rx: mpsc::Receiver<Msg>,
    blocked: bool,
    ended: bool,
}

struct Aligning {
    id: u64,
    states: Vec<(usize, serde_json::Value)>,
}

/// What the inputs deliver next.
#[derive(Debug)]
pub(super) enum Delivery {
    Batch(RecordBatch),
    /// Every input delivered checkpoint `id`'s barrier (or ended): the source subtasks' states.
    Aligned {
        id: u64,
        sources: Vec<(usize, serde_json::Value)>,
    },
    /// Every input ended.
    End,
}

pub(super) struct Inputs {
    inputs: Vec<Input>,
    /// Where the next receive starts (round-robin between inputs, so none starves).
    next: usize,
    aligning: Option<Aligning>,
    /// Checkpoints up to this one are done here (acknowledged or abandoned): their barriers are dropped.
    done_through: u64,
}

impl Inputs {
    /// `inputs`: (the source subtask's index within the pipeline, its channel).
    pub(super) fn new(inputs: Vec<(usize, mpsc::Receiver<Msg>)>) -> Self {
        Inputs {
            inputs: inputs
                .into_iter()
                .map(|(source, rx)| Input {
                    source,
                    rx,
                    blocked: false,
                    ended: false,
                })
                .collect(),
            next: 0,
            aligning: None,
            done_through: 0,
        }
    }

    /// Whether no open input has a message waiting (the sink's input ran dry).
    pub(super) fn is_empty(&self) -> bool {
        self.inputs
            .iter()
            .all(|i| i.blocked || i.ended || i.rx.is_empty())
    }

    /// The checkpoint timed out (or failed): stop waiting for its barriers.
    pub(super) fn abandon(&mut self, id: u64) {
        if self.aligning.as_ref().is_some_and(|a| a.id <= id) {
            self.aligning = None;
            self.unblock();
        }
        self.done_through = self.done_through.max(id);
    }

    /// The next batch, completed alignment or the end of every input. Cancel safe: a message is taken
    /// from a channel only where it is also processed, without an await in between.
    pub(super) async fn next(&mut self) -> Delivery {
        loop {
            if self.inputs.iter().all(|i| i.ended) {
                return Delivery::End;
            }
            let (i, msg) = std::future::poll_fn(|cx| self.poll_any(cx)).await;
            match msg {
                Some(Msg::Batch(b)) => return Delivery::Batch(b),
                Some(Msg::Barrier(id, state)) => {
                    if let Some(d) = self.on_barrier(i, id, state) {
                        return d;
                    }
                }
                Some(Msg::End) | None => {
                    self.inputs[i].ended = true;
                    if let Some(d) = self.aligned() {
                        return d;
                    }
                }
            }
        }
    }

    fn poll_any(&mut self, cx: &mut std::task::Context<'_>) -> Poll<(usize, Option<Msg>)> {
        let n = self.inputs.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            let input = &mut self.inputs[i];
            if input.blocked || input.ended {
                continue;
            }
            if let Poll::Ready(msg) = input.rx.poll_recv(cx) {
                self.next = (i + 1) % n;
                return Poll::Ready((i, msg));
            }
        }
        Poll::Pending
    }

    fn on_barrier(&mut self, i: usize, id: u64, state: serde_json::Value) -> Option<Delivery> {
        if id <= self.done_through {
            return None;
        }
        match &self.aligning {
            Some(a) if a.id > id => return None,
            Some(a) if a.id < id => {
                // A newer checkpoint: the one still waiting will not complete.
                self.done_through = a.id;
                self.aligning = None;
                self.unblock();
            }
            _ => {}
        }
        let source = self.inputs[i].source;
        self.aligning
            .get_or_insert(Aligning {
                id,
                states: Vec::new(),
            })
            .states
            .push((source, state));
        self.inputs[i].blocked = true;
        self.aligned()
    }

    /// The alignment in progress, when every input delivered its barrier or ended.
    fn aligned(&mut self) -> Option<Delivery> {
        self.aligning.as_ref()?;
        if !self.inputs.iter().all(|i| i.blocked || i.ended) {
            return None;
        }
        let a = self.aligning.take()?;
        self.unblock();
        self.done_through = a.id;
        let mut sources = a.states;
        sources.sort_by_key(|(s, _)| *s);
        Some(Delivery::Aligned { id: a.id, sources })
    }

    fn unblock(&mut self) {
        for i in &mut self.inputs {
            i.blocked = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use serde_json::json;

    use super::*;

    fn rows(v: i64) -> Msg {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        Msg::Batch(RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![v]))]).unwrap())
    }

    fn value(d: &Delivery) -> String {
        match d {
            Delivery::Batch(b) => {
                let v = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                format!("row {}", v.value(0))
            }
            Delivery::Aligned { id, sources } => format!("aligned {id} {sources:?}"),
            Delivery::End => "end".into(),
        }
    }

    async fn drain(inputs: &mut Inputs, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(value(&inputs.next().await));
        }
        out
    }

    #[tokio::test]
    async fn rows_after_a_barrier_wait_until_every_input_delivered_it() {
        let (a, ra) = mpsc::channel(16);
        let (b, rb) = mpsc::channel(16);
        let mut inputs = Inputs::new(vec![(0, ra), (1, rb)]);
        // Input 0 is ahead: its barrier and a row of the next period come before input 1's rows.
        a.send(rows(1)).await.unwrap();
        a.send(Msg::Barrier(5, json!("s0"))).await.unwrap();
        a.send(rows(2)).await.unwrap();
        b.send(rows(10)).await.unwrap();
        b.send(rows(11)).await.unwrap();
        b.send(Msg::Barrier(5, json!("s1"))).await.unwrap();
        b.send(rows(12)).await.unwrap();
        let got = drain(&mut inputs, 6).await;
        assert_eq!(
            &got[..4],
            [
                "row 1",
                "row 10",
                "row 11",
                r#"aligned 5 [(0, String("s0")), (1, String("s1"))]"#
            ],
            "{got:?}"
        );
        let mut after = got[4..].to_vec();
        after.sort();
        assert_eq!(after, ["row 12", "row 2"]);
        drop((a, b));
        assert_eq!(value(&inputs.next().await), "end");
    }

    #[tokio::test]
    async fn a_newer_barrier_abandons_an_alignment_and_late_ones_are_dropped() {
        let (a, ra) = mpsc::channel(16);
        let (b, rb) = mpsc::channel(16);
        let mut inputs = Inputs::new(vec![(0, ra), (1, rb)]);
        // Input 1 never got checkpoint 3's trigger.
        a.send(Msg::Barrier(3, json!("a3"))).await.unwrap();
        a.send(rows(1)).await.unwrap();
        a.send(Msg::Barrier(4, json!("a4"))).await.unwrap();
        b.send(rows(2)).await.unwrap();
        b.send(Msg::Barrier(4, json!("b4"))).await.unwrap();
        let got = drain(&mut inputs, 3).await;
        assert_eq!(got[0], "row 2");
        assert_eq!(
            got[1], "row 1",
            "checkpoint 3 was abandoned, input 0 flows again"
        );
        assert_eq!(
            got[2],
            r#"aligned 4 [(0, String("a4")), (1, String("b4"))]"#
        );
        // A timed-out checkpoint's late barrier does not block anything.
        inputs.abandon(5);
        b.send(Msg::Barrier(5, json!("late"))).await.unwrap();
        b.send(rows(3)).await.unwrap();
        assert_eq!(value(&inputs.next().await), "row 3");
    }

    #[tokio::test]
    async fn an_ended_input_counts_as_aligned() {
        let (a, ra) = mpsc::channel(16);
        let (b, rb) = mpsc::channel(16);
        let mut inputs = Inputs::new(vec![(0, ra), (1, rb)]);
        a.send(Msg::Barrier(1, json!(0))).await.unwrap();
        b.send(Msg::End).await.unwrap();
        assert_eq!(value(&inputs.next().await), "aligned 1 [(0, Number(0))]");
        a.send(Msg::End).await.unwrap();
        assert_eq!(value(&inputs.next().await), "end");
        assert!(inputs.is_empty());
    }
}
