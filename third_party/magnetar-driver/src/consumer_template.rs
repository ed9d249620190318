// SPDX-License-Identifier: Apache-2.0

//! Shared private [`ConsumerTemplate`] used by [`crate::MultiTopicsConsumer`] and
//! [`crate::PatternConsumer`] to propagate a frozen [`crate::ConsumerBuilder`]
//! configuration to each per-topic child consumer.
//!
//! Both surfaces capture the same superset of [`crate::ConsumerBuilder`] knobs
//! and replay them through [`Self::apply`] when subscribing newly-added
//! (multi-topics) or newly-discovered (pattern) topics. Keeping a single
//! definition here means the two call sites cannot drift out of sync as new
//! consumer knobs land.
//!
//! Private — no public API surface.

/// Frozen [`crate::ConsumerBuilder`] template propagated to every per-topic child.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerTemplate {
    pub(crate) subscription: String,
    /// Consumer name propagated verbatim to every per-topic child (no per-partition
    /// suffix — broker `topics stats` then shows the same `consumerName` for each
    /// child, matching the Java client). `None` lets the broker assign one.
    pub(crate) consumer_name: Option<String>,
    pub(crate) sub_type: magnetar_proto::pb::command_subscribe::SubType,
    pub(crate) receiver_queue_size: usize,
    /// Issue #301: pluggable receiver-queue policy propagated to every child
    /// consumer so partitioned / multi-topics consumers self-tune too. `None`
    /// keeps the `Fixed(receiver_queue_size)` default.
    pub(crate) receiver_queue_policy:
        Option<std::sync::Arc<dyn magnetar_proto::ReceiverQueuePolicy>>,
    /// Issue #301: auto-adjust tick cadence for [`Self::receiver_queue_policy`].
    pub(crate) receiver_queue_adjust_interval: Option<std::time::Duration>,
    pub(crate) initial_position: magnetar_proto::pb::command_subscribe::InitialPosition,
    pub(crate) durable: bool,
    pub(crate) properties: Vec<(String, String)>,
    pub(crate) negative_ack_redelivery_delay: Option<std::time::Duration>,
    pub(crate) ack_timeout: Option<std::time::Duration>,
    pub(crate) ack_group_time: Option<std::time::Duration>,
    pub(crate) dlq_policy: Option<(u32, Option<String>)>,
    pub(crate) max_pending_chunked_message: Option<usize>,
    pub(crate) auto_ack_oldest_chunked_message_on_queue_full: Option<bool>,
    pub(crate) expire_time_of_incomplete_chunked_message: Option<std::time::Duration>,
    pub(crate) read_compacted: bool,
    pub(crate) priority_level: Option<i32>,
    pub(crate) subscription_properties: Vec<(String, String)>,
    pub(crate) key_shared: Option<magnetar_proto::KeySharedConfig>,
    pub(crate) replicate_subscription_state: Option<bool>,
    pub(crate) force_topic_creation: Option<bool>,
    pub(crate) start_message_rollback_duration_sec: Option<u64>,
}

impl ConsumerTemplate {
    /// Apply the template to a [`crate::ConsumerBuilder`] for the given topic.
    pub(crate) fn apply<'a, E: crate::Engine>(
        &self,
        mut builder: crate::ConsumerBuilder<'a, E>,
    ) -> crate::ConsumerBuilder<'a, E> {
        builder = builder
            .subscription(self.subscription.clone())
            .subscription_type(self.sub_type)
            .durable(self.durable)
            .initial_position(self.initial_position)
            .receiver_queue_size(self.receiver_queue_size)
            .read_compacted(self.read_compacted);
        if let Some(name) = &self.consumer_name {
            builder = builder.name(name.clone());
        }
        // Issue #301: propagate the receiver-queue policy (and its tick cadence)
        // to every per-topic child so partitioned / multi-topics consumers
        // self-tune too. `receiver_queue_size` above already seeds the `Fixed`
        // default; a `Some(policy)` here overrides it (and the builder's
        // last-setter-wins keeps them consistent).
        if let Some(policy) = self.receiver_queue_policy.clone() {
            builder = builder.receiver_queue_policy(policy);
            if let Some(interval) = self.receiver_queue_adjust_interval {
                builder = builder.receiver_queue_adjust_interval(interval);
            }
        }
        for (k, v) in &self.properties {
            builder = builder.property(k.clone(), v.clone());
        }
        if let Some(d) = self.negative_ack_redelivery_delay {
            builder = builder.negative_ack_redelivery_delay(d);
        }
        if let Some(t) = self.ack_timeout {
            builder = builder.ack_timeout(t);
        }
        if let Some(w) = self.ack_group_time {
            builder = builder.ack_group_time(w);
        }
        if let Some((max, topic_opt)) = &self.dlq_policy {
            builder = builder.dead_letter_policy(*max, topic_opt.clone());
        }
        if let Some(max) = self.max_pending_chunked_message {
            builder = builder.max_pending_chunked_message(max);
        }
        if let Some(auto_ack) = self.auto_ack_oldest_chunked_message_on_queue_full {
            builder = builder.auto_ack_oldest_chunked_message_on_queue_full(auto_ack);
        }
        if let Some(expire) = self.expire_time_of_incomplete_chunked_message {
            builder = builder.expire_time_of_incomplete_chunked_message(expire);
        }
        if let Some(level) = self.priority_level {
            builder = builder.priority_level(level);
        }
        for (k, v) in &self.subscription_properties {
            builder = builder.subscription_property(k.clone(), v.clone());
        }
        if let Some(cfg) = self.key_shared.clone() {
            builder = builder.key_shared_policy(cfg);
        }
        if let Some(on) = self.replicate_subscription_state {
            builder = builder.replicate_subscription_state(on);
        }
        if let Some(on) = self.force_topic_creation {
            builder = builder.force_topic_creation(on);
        }
        if let Some(s) = self.start_message_rollback_duration_sec {
            builder = builder.start_message_rollback_duration(s);
        }
        builder
    }
}
