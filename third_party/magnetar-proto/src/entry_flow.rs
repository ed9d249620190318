//! pulsar-connect patch 11: flow grants sized in entries, so a consumer of batched entries holds
//! about `receiver_queue_size` messages instead of up to a hundred batches.
//!
//! Flow permits count messages, but a broker without `preciseDispatcherFlowControl` (the default)
//! reads `min(permits, 100)` *entries* per dispatch and charges every member of a batch
//! afterwards. With ~1 000 messages per entry a 2 000-permit grant brought ~92 000 messages; the
//! broker's balance went ~90 000 below zero and the half-queue refills only paid that debt back,
//! so the queue swung between empty and ~100 000 messages (30+ MB of `IncomingMessage`s).
//!
//! Off by default (upstream behaviour, which magnetar's own tests pin); a runtime turns it on for
//! the consumers it creates afterwards with [`set_entry_sized_flow`]. The rule, per consumer:
//! - The client mirrors the broker's balance *including its debt*: `permit_balance - debt`, where
//!   `debt` counts dispatch units that arrived while the mirrored balance was already zero.
//! - Until an entry arrived the first grant is **one** permit (one entry), because how many
//!   messages an entry holds is learned from deliveries: `m` below is the **largest** entry of the
//!   last [`SIZE_WINDOW`] to 2 × [`SIZE_WINDOW`] entries, not the last one. A topic's entries vary
//!   (a producer's batch closes at its size limit, its delay or a flush): a grant of `R / 24`
//!   entries sized after a 24-message entry brought ~80 entries of 1 000 messages each.
//! - Entries of one message (no batching): the upstream half-queue refill, after the window was
//!   topped up to `receiver_queue_size` once.
//! - Entries of `m > 1` messages: while fewer than half a receiver queue of messages wait and the
//!   broker holds fewer than `receiver_queue_size / m` permits (at least 1), one flow pays the
//!   debt and tops the balance up to that — the broker then reads about a receiver queue of
//!   messages. Permits the client owes beyond that are withheld (`consumed_since_flow`).
//! - Patch 14, the ramp: the entries outstanding grow toward `receiver_queue_size / m` by one
//!   entry per window of entries delivered (from [`RAMP_START`], and again from there whenever the
//!   sizing falls, i.e. when `m` grows). The largest recent entry says nothing of entries still to
//!   come: a topic written first in small batches (a producer starting slowly, batches closing by
//!   time) and then in full ones had grants of ~190 entries sized for 11-message entries, and the
//!   broker read 100 entries of 1 000 messages on them (~100 000 messages queued per consumer). With
//!   the ramp, `P` small entries at the start leave about `sqrt(2P + 64)` entries outstanding when
//!   the large ones come.
//! - Liveness never rests on the mirror alone: when a consumer that withholds permits has had an
//!   empty queue and no dispatch for [`RELEASE_AFTER`], it grants a whole receiver queue more
//!   (once per silence, and only while the mirror shows less than that outstanding); so does a
//!   first grant of one entry that brought nothing for that long — a mirror
//!   that was wrong costs one pause, never a stall. The stall watchdog (probe + re-subscribe)
//!   stays behind it.

use std::time::{Duration, Instant};

use crate::consumer::ConsumerState;

static ENTRY_SIZED_FLOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns entry-sized flow grants on (or off) for consumers created from now on, process-wide.
pub fn set_entry_sized_flow(enabled: bool) {
    ENTRY_SIZED_FLOW.store(enabled, std::sync::atomic::Ordering::Relaxed);
}

/// Entries per window of the largest-recent-entry estimate (see the module docs).
pub const SIZE_WINDOW: u32 = 32;

/// Entries outstanding a consumer starts from before it ramps up to `receiver_queue_size / m`
/// (see the module docs).
pub const RAMP_START: u32 = 8;

/// How long a consumer that withholds permits waits on an empty queue with no dispatch before it
/// grants a whole receiver queue regardless of its mirror of the broker's balance.
pub const RELEASE_AFTER: Duration = Duration::from_secs(1);

/// The entry-sized flow state of one consumer (see the module docs).
#[derive(Debug, Clone)]
pub struct EntryFlow {
    /// Whether this consumer sizes its grants in entries ([`set_entry_sized_flow`] when created).
    pub(crate) enabled: bool,
    /// Dispatch units that arrived while the mirrored balance was zero: the broker's balance is
    /// `permit_balance - debt`.
    pub(crate) debt: u32,
    /// Messages in the last entry delivered (`0` until one arrived).
    pub(crate) entry_messages: u32,
    /// The largest entry of the current window, of the previous one, and the entries counted in the
    /// current one: grants are sized for the largest of both ([`EntryFlow::messages_per_entry`]).
    pub(crate) window_max: u32,
    pub(crate) previous_max: u32,
    pub(crate) window_entries: u32,
    /// The most entries a grant may leave outstanding (the ramp), and the entries delivered since it
    /// last grew: it grows by one per `ramp` entries delivered, up to `receiver_queue_size / m`.
    pub(crate) ramp: u32,
    pub(crate) ramp_delivered: u32,
    /// When the queue last ran empty, and the dispatch mark then (for the release).
    pub(crate) idle_since: Option<(Instant, u64)>,
}

impl Default for EntryFlow {
    fn default() -> Self {
        Self {
            enabled: ENTRY_SIZED_FLOW.load(std::sync::atomic::Ordering::Relaxed),
            debt: 0,
            entry_messages: 0,
            window_max: 0,
            previous_max: 0,
            window_entries: 0,
            ramp: RAMP_START,
            ramp_delivered: 0,
            idle_since: None,
        }
    }
}

impl EntryFlow {
    /// Messages per entry to size grants for: the largest of the last [`SIZE_WINDOW`] to
    /// 2 × [`SIZE_WINDOW`] entries (`0` until one arrived).
    pub(crate) fn messages_per_entry(&self) -> u32 {
        self.window_max.max(self.previous_max)
    }

    /// Entries that hold a receiver queue of `r` messages: `r / m`, at least 1.
    fn full_entries(&self, r: i64) -> i64 {
        (r / i64::from(self.messages_per_entry().max(1))).max(1)
    }

    /// Entries a grant may leave outstanding with a receiver queue of `r` messages:
    /// [`Self::full_entries`], but no more than the ramp allows.
    fn entries_target(&self, r: i64) -> i64 {
        self.full_entries(r).min(i64::from(self.ramp).max(1))
    }

    /// An entry of `messages` messages arrived, with a receiver queue of `r` messages.
    fn learn(&mut self, messages: u32, r: i64) {
        self.entry_messages = messages;
        if self.window_entries >= SIZE_WINDOW {
            self.previous_max = self.window_max;
            self.window_max = 0;
            self.window_entries = 0;
        }
        self.window_max = self.window_max.max(messages);
        self.window_entries += 1;
        self.ramp_delivered += 1;
        if self.ramp_delivered >= self.ramp {
            self.ramp = self.ramp.saturating_add(1);
            self.ramp_delivered = 0;
        }
        // Never above what the current sizing allows, so that when entries shrink the grants grow
        // back from the start, not at once.
        let full = u32::try_from(self.full_entries(r)).unwrap_or(u32::MAX);
        self.ramp = self.ramp.min(full).max(RAMP_START);
    }
}

/// What [`ConsumerState::entry_grant`] decided.
pub(crate) enum EntryGrant {
    /// Nothing delivered yet: the upstream half-queue rule applies.
    Upstream,
    /// Grant this many permits now.
    Grant(u32),
    /// No flow now.
    Hold,
}

impl ConsumerState {
    /// The broker's permit balance as mirrored here (negative while it is owed a debt).
    pub(crate) fn broker_balance(&self) -> i64 {
        i64::from(self.permit_balance) - i64::from(self.entry_flow.debt)
    }

    fn receiver_queue_permits(&self) -> i64 {
        i64::try_from(self.receiver_queue_size.max(1)).unwrap_or(i64::MAX)
    }

    /// Whether grants are sized in entries (on, and a recent entry was a batch of several messages:
    /// [`EntryFlow::messages_per_entry`]).
    pub(crate) fn grants_in_entries(&self) -> bool {
        self.entry_flow.enabled && self.entry_flow.messages_per_entry() > 1
    }

    /// The first grant of an attach: one entry until an entry taught how many messages it holds.
    pub(crate) fn initial_permits(&self) -> u32 {
        let r = self.receiver_queue_permits();
        let permits = match self.entry_flow.messages_per_entry() {
            _ if !self.entry_flow.enabled => r,
            0 => 1,
            1 => r,
            _ => self.entry_flow.entries_target(r),
        };
        u32::try_from(permits).unwrap_or(u32::MAX)
    }

    /// The flow `maybe_flow` should send now (see the module docs).
    pub(crate) fn entry_grant(&self) -> EntryGrant {
        let r = self.receiver_queue_permits();
        let owed = i64::from(self.consumed_since_flow);
        let queued = i64::try_from(self.queue.len()).unwrap_or(i64::MAX);
        let balance = self.broker_balance();
        let permits = match self.entry_flow.messages_per_entry() {
            _ if !self.entry_flow.enabled => return EntryGrant::Upstream,
            0 => return EntryGrant::Upstream,
            1 => {
                let window = balance + owed + queued;
                if window >= r {
                    return EntryGrant::Upstream;
                }
                r - window + owed
            }
            _ => {
                let target = self.entry_flow.entries_target(r);
                if queued >= (r / 2).max(1) || balance >= target {
                    return EntryGrant::Hold;
                }
                target - balance
            }
        };
        match u32::try_from(permits) {
            Ok(0) | Err(_) => EntryGrant::Hold,
            Ok(p) => EntryGrant::Grant(p),
        }
    }

    /// Books a grant of `permits`: the broker's debt first, then its balance.
    pub(crate) fn book_grant(&mut self, permits: u32) {
        if self.entry_flow.enabled {
            tracing::debug!(
                consumer_id = self.handle.0,
                permits,
                balance = self.broker_balance(),
                owed = self.consumed_since_flow,
                queued = self.queue.len(),
                entry_messages = self.entry_flow.entry_messages,
                sized_for = self.entry_flow.messages_per_entry(),
                "flow grant",
            );
        }
        let repaid = permits.min(self.entry_flow.debt);
        self.entry_flow.debt -= repaid;
        self.permit_balance = self.permit_balance.saturating_add(permits - repaid);
        self.granted_permits = self.granted_permits.saturating_add(permits);
        self.consumed_since_flow = self.consumed_since_flow.saturating_sub(permits);
    }

    /// One dispatch unit arrived: from the balance, or into debt when the balance is spent.
    pub(crate) fn book_dispatch_unit(&mut self) {
        if self.entry_flow.enabled && self.permit_balance == 0 {
            self.entry_flow.debt = self.entry_flow.debt.saturating_add(1);
        } else {
            self.permit_balance = self.permit_balance.saturating_sub(1);
        }
    }

    /// An entry of `messages` messages arrived.
    pub(crate) fn learn_entry_size(&mut self, messages: Option<i32>) {
        let r = self.receiver_queue_permits();
        self.entry_flow.learn(
            messages.map_or(1, |n| u32::try_from(n).unwrap_or(1).max(1)),
            r,
        );
    }

    /// The queue ran empty at `now`: the release clock starts (for a consumer that withholds).
    pub(crate) fn note_queue_empty(&mut self, now: Instant) {
        if self.grants_in_entries() && self.entry_flow.idle_since.is_none() {
            self.entry_flow.idle_since = Some((now, self.dispatch_units_received));
        }
    }

    /// After a first grant smaller than the receiver queue (one entry: nothing was delivered yet),
    /// the release clock starts at `now` as well: should that grant bring nothing — a topic with
    /// nothing to read yet, or a grant the broker did not act on — the backstop tops the window up to
    /// a whole receiver queue after [`RELEASE_AFTER`], as before this patch.
    pub(crate) fn arm_release_after_initial(&mut self, now: Instant) {
        let r = u64::try_from(self.receiver_queue_size).unwrap_or(u64::MAX);
        if self.entry_flow.enabled && u64::from(self.granted_permits) < r {
            self.entry_flow.idle_since = Some((now, self.dispatch_units_received));
        }
    }

    /// When [`Self::release_withheld`] may fire, if it can.
    #[must_use]
    pub fn next_release_deadline(&self) -> Option<Instant> {
        let (since, _) = self.entry_flow.idle_since?;
        Some(crate::time::deadline_with_clamp(since, RELEASE_AFTER))
    }

    /// The liveness backstop (see the module docs): a whole receiver queue of permits for a
    /// consumer that withholds, has had an empty queue and no dispatch for [`RELEASE_AFTER`].
    pub fn release_withheld(&mut self, now: Instant) -> Option<crate::pb::CommandFlow> {
        let (since, mark) = self.entry_flow.idle_since?;
        if mark != self.dispatch_units_received
            || !self.queue.is_empty()
            || self.closed
            || self.paused
            || self.pending_seek.is_some()
        {
            self.entry_flow.idle_since = None;
            return None;
        }
        if now < crate::time::deadline_with_clamp(since, RELEASE_AFTER) {
            return None;
        }
        self.entry_flow.idle_since = None;
        let r = self.receiver_queue_permits();
        if self.broker_balance() >= r {
            return None;
        }
        let permits = u32::try_from(r).unwrap_or(u32::MAX);
        self.book_grant(permits);
        self.clear_stall_watch();
        tracing::debug!(
            consumer_id = self.handle.0,
            permits,
            "no dispatch for a while on an empty queue: withheld permits released",
        );
        Some(crate::pb::CommandFlow {
            consumer_id: self.handle.0,
            message_permits: permits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer(receiver_queue_size: usize) -> ConsumerState {
        let mut c = ConsumerState::new(
            crate::ConsumerHandle(1),
            "t".to_owned(),
            "s".to_owned(),
            receiver_queue_size,
        );
        c.entry_flow.enabled = true;
        let flow = c.initial_flow();
        assert_eq!(
            flow.message_permits, 1,
            "one entry before the first delivery"
        );
        c
    }

    /// A one-byte message that arrived `at`.
    fn message(at: Instant) -> crate::event::IncomingMessage {
        crate::event::IncomingMessage {
            message_id: crate::types::MessageId::EARLIEST,
            metadata: std::sync::Arc::default(),
            single_metadata: None,
            payload: bytes::Bytes::from_static(b"x"),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: at,
        }
    }

    /// The broker dispatches one entry of `m` messages: every member charged.
    fn dispatch(c: &mut ConsumerState, m: u32, at: Instant) {
        c.learn_entry_size(Some(i32::try_from(m).unwrap()));
        for _ in 0..m {
            c.record_dispatch_unit();
            c.queue.push_back(message(at));
        }
    }

    /// Simulates a broker that reads `min(balance, 100)` entries while its balance is positive (the
    /// entries' sizes cycle through `sizes`), against a client popping `pop` messages between
    /// dispatches; returns the largest queue seen.
    fn run(
        sizes: &[u32],
        receiver_queue_size: usize,
        pop: usize,
        rounds: usize,
    ) -> (usize, ConsumerState) {
        let at = Instant::now();
        let mut c = consumer(receiver_queue_size);
        let mut broker: i64 = 1;
        let mut peak = 0;
        let mut next = sizes.iter().copied().cycle();
        for _ in 0..rounds {
            if broker > 0 {
                for _ in 0..broker.min(100) {
                    let m = next.next().expect("sizes");
                    dispatch(&mut c, m, at);
                    broker -= i64::from(m);
                }
                if let Some(flow) = c.maybe_flow() {
                    broker += i64::from(flow.message_permits);
                }
            }
            peak = peak.max(c.queue.len());
            for _ in 0..pop {
                if c.pop_message(at).is_none() {
                    break;
                }
                if let Some(flow) = c.maybe_flow() {
                    broker += i64::from(flow.message_permits);
                }
            }
            assert_eq!(c.broker_balance(), broker, "the mirror follows the broker");
        }
        (peak, c)
    }

    #[test]
    fn batched_entries_keep_about_a_receiver_queue() {
        let (peak, _) = run(&[920], 2000, 500, 400);
        assert!(peak <= 2000 + 2 * 920, "peak queue {peak}");
        assert!(peak >= 920, "entries were dispatched: {peak}");
    }

    /// A producer's batches close at its size limit, its delay or a flush: entries of a topic vary.
    /// A grant sized after a small entry must not bring ~R/24 large ones.
    #[test]
    fn entries_of_varying_size_are_granted_for_the_largest_recent_one() {
        let (peak, _) = run(&[1000, 24, 1000, 48, 1000, 264, 96], 2000, 500, 600);
        assert!(peak <= 2000 + 2 * 1000 + 264, "peak queue {peak}");
        // Sizes that fall stay sized for the largest one for at most 2 windows of entries.
        let mut sizes = vec![1000; 40];
        sizes.extend(std::iter::repeat_n(10, 60_000)); // more than 600 rounds dispatch: no wrap
        let (peak, c) = run(&sizes, 2000, 500, 600);
        assert!(peak <= 2000 + 2 * 1000, "peak queue {peak}");
        assert_eq!(
            c.entry_flow.messages_per_entry(),
            10,
            "the large entries aged out"
        );
    }

    /// A topic written first in small batches, then in full ones: grants sized for the small
    /// entries must not have the broker read 100 large ones.
    #[test]
    fn small_entries_first_then_large_ones_do_not_flood_the_queue() {
        for small in [50_u32, 250, 1_000] {
            let mut sizes = vec![11; small as usize];
            sizes.extend(std::iter::repeat_n(1000, 5000));
            let (peak, c) = run(&sizes, 2000, 500, 600);
            // About sqrt(2 * small + 64) entries are outstanding when the large ones come (without
            // the ramp, up to 100: the broker's read).
            let ramped = (2.0 * f64::from(small) + 64.0).sqrt() as usize + 2;
            assert!(
                peak <= 2000 + ramped * 1000,
                "{small} small entries first: peak queue {peak}"
            );
            assert_eq!(c.entry_flow.messages_per_entry(), 1000);
            assert_eq!(c.entry_flow.ramp, RAMP_START, "sized for the large entries");
        }
    }

    /// The ramp only delays: on a topic of small entries the grants reach `R / m` entries, and when
    /// large entries age out they ramp up again from the start.
    #[test]
    fn the_ramp_reaches_a_receiver_queue_of_small_entries() {
        let mut sizes = vec![1000; 40];
        sizes.extend(std::iter::repeat_n(10, 100_000));
        let at = Instant::now();
        let mut c = consumer(2000);
        for (i, m) in sizes.iter().enumerate() {
            c.learn_entry_size(Some(i32::try_from(*m).unwrap()));
            if i == 40 {
                assert_eq!(c.entry_flow.ramp, RAMP_START);
            }
        }
        assert_eq!(c.entry_flow.messages_per_entry(), 10);
        assert_eq!(c.entry_flow.ramp, 200, "ramped up to R / m");
        assert_eq!(c.initial_permits(), 200);
        c.queue.push_back(message(at));
        assert!(
            matches!(c.entry_grant(), EntryGrant::Grant(p) if i64::from(p) == 200 - c.broker_balance())
        );
    }

    #[test]
    fn unbatched_entries_keep_the_upstream_window() {
        let (peak, c) = run(&[1], 2000, 300, 400);
        assert!(peak <= 2000, "peak queue {peak}");
        let window = c.broker_balance()
            + i64::from(c.consumed_since_flow)
            + i64::try_from(c.queue.len()).unwrap();
        assert_eq!(window, 2000, "the window grew back to the receiver queue");
    }

    #[test]
    fn a_wrong_mirror_is_released_after_a_pause() {
        let at = Instant::now();
        let mut c = consumer(2000);
        dispatch(&mut c, 500, at);
        while c.pop_message(at).is_some() {
            let _ = c.maybe_flow();
        }
        c.note_queue_empty(at);
        // The mirror says the broker holds permits; suppose it does not (a unit it charged never
        // arrived): nothing is dispatched, so nothing more would be granted.
        assert!(c.broker_balance() > 0);
        assert!(matches!(c.entry_grant(), EntryGrant::Hold));
        assert!(c.release_withheld(at + RELEASE_AFTER / 2).is_none());
        let flow = c.release_withheld(at + RELEASE_AFTER).expect("released");
        assert_eq!(flow.message_permits, 2000);
        assert!(
            c.release_withheld(at + 3 * RELEASE_AFTER).is_none(),
            "once per silence"
        );
    }

    #[test]
    fn off_by_default_it_is_the_upstream_flow() {
        let mut c = ConsumerState::new(
            crate::ConsumerHandle(1),
            "t".to_owned(),
            "s".to_owned(),
            100,
        );
        c.entry_flow.enabled = false;
        assert_eq!(c.initial_flow().message_permits, 100);
        let at = Instant::now();
        c.learn_entry_size(Some(50));
        for _ in 0..150 {
            c.record_dispatch_unit();
        }
        assert_eq!(c.broker_balance(), 0, "no debt kept");
        assert!(matches!(c.entry_grant(), EntryGrant::Upstream));
        c.note_queue_empty(at);
        assert!(c.next_release_deadline().is_none());
    }

    #[test]
    fn a_first_grant_that_brings_nothing_is_topped_up_after_a_pause() {
        let at = Instant::now();
        let mut c = consumer(2000);
        c.arm_release_after_initial(at);
        assert!(c.release_withheld(at + RELEASE_AFTER / 2).is_none());
        let flow = c.release_withheld(at + RELEASE_AFTER).expect("released");
        assert_eq!(flow.message_permits, 2000);
        let mut fed = consumer(2000);
        fed.arm_release_after_initial(at);
        dispatch(&mut fed, 1, at);
        assert!(
            fed.release_withheld(at + RELEASE_AFTER).is_none(),
            "an entry came on the first grant"
        );
    }

    #[test]
    fn a_dispatch_cancels_the_release() {
        let at = Instant::now();
        let mut c = consumer(2000);
        dispatch(&mut c, 500, at);
        while c.pop_message(at).is_some() {}
        c.note_queue_empty(at);
        dispatch(&mut c, 500, at);
        assert!(c.release_withheld(at + 2 * RELEASE_AFTER).is_none());
    }
}
