//! Building the flattened message and key batches the plugins receive.

use super::model;

/// Collects messages into one [`model::MessageBatch`]: one payload buffer plus offsets, keys likewise.
#[derive(Debug, Default)]
pub struct MessageBatchBuilder {
    count: u32,
    payloads: Vec<u8>,
    payload_offsets: Vec<u32>,
    keys: KeyBatchBuilder,
    properties: PropertyBatchBuilder,
    has_properties: bool,
    event_times: Vec<i64>,
    has_event_times: bool,
}

/// One message to add.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageRef<'a> {
    pub payload: &'a [u8],
    pub key: Option<&'a [u8]>,
    pub properties: &'a [(&'a str, &'a str)],
    /// Event time in milliseconds since the epoch (`None` or 0: unset).
    pub event_time: Option<i64>,
}

impl MessageBatchBuilder {
    pub fn new() -> Self {
        MessageBatchBuilder {
            payload_offsets: vec![0],
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn push(&mut self, message: MessageRef<'_>) {
        self.count += 1;
        self.payloads.extend_from_slice(message.payload);
        self.payload_offsets.push(self.payloads.len() as u32);
        self.keys.push(message.key);
        self.properties.push(message.properties);
        self.has_properties |= !message.properties.is_empty();
        self.event_times.push(message.event_time.unwrap_or(0));
        self.has_event_times |= message.event_time.is_some_and(|t| t != 0);
    }

    /// Builds the batch; properties are only included when `with_properties`.
    pub fn finish(self, with_properties: bool) -> model::MessageBatch {
        model::MessageBatch {
            count: self.count,
            payloads: self.payloads,
            payload_offsets: self.payload_offsets,
            keys: self.keys.finish(),
            properties: (with_properties && self.has_properties).then(|| self.properties.finish()),
            event_times: self.has_event_times.then_some(self.event_times),
        }
    }
}

/// Collects message keys into one [`model::KeyBatch`].
#[derive(Debug, Default)]
pub struct KeyBatchBuilder {
    count: u32,
    data: Vec<u8>,
    offsets: Vec<u32>,
    present: Vec<u8>,
    missing: bool,
}

impl KeyBatchBuilder {
    pub fn push(&mut self, key: Option<&[u8]>) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let i = self.count as usize;
        if i.is_multiple_of(8) {
            self.present.push(0);
        }
        match key {
            Some(k) => {
                self.data.extend_from_slice(k);
                self.present[i / 8] |= 1 << (i % 8);
            }
            None => self.missing = true,
        }
        self.offsets.push(self.data.len() as u32);
        self.count += 1;
    }

    pub fn finish(mut self) -> model::KeyBatch {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        model::KeyBatch {
            count: self.count,
            data: self.data,
            offsets: self.offsets,
            present: self.missing.then_some(self.present),
        }
    }
}

/// Collects message properties into one [`model::PropertyBatch`].
#[derive(Debug, Default)]
pub struct PropertyBatchBuilder {
    message_offsets: Vec<u32>,
    names: Vec<u8>,
    name_offsets: Vec<u32>,
    values: Vec<u8>,
    value_offsets: Vec<u32>,
}

impl PropertyBatchBuilder {
    pub fn push(&mut self, properties: &[(&str, &str)]) {
        if self.message_offsets.is_empty() {
            self.message_offsets.push(0);
            self.name_offsets.push(0);
            self.value_offsets.push(0);
        }
        for (name, value) in properties {
            self.names.extend_from_slice(name.as_bytes());
            self.name_offsets.push(self.names.len() as u32);
            self.values.extend_from_slice(value.as_bytes());
            self.value_offsets.push(self.values.len() as u32);
        }
        self.message_offsets
            .push(self.name_offsets.len() as u32 - 1);
    }

    pub fn finish(mut self) -> model::PropertyBatch {
        if self.message_offsets.is_empty() {
            self.message_offsets.push(0);
            self.name_offsets.push(0);
            self.value_offsets.push(0);
        }
        model::PropertyBatch {
            message_offsets: self.message_offsets,
            names: self.names,
            name_offsets: self.name_offsets,
            values: self.values,
            value_offsets: self.value_offsets,
        }
    }
}
