//! The arithmetic of the built-in message routers, as plain functions without dependencies, so the
//! router plugins (wasm components) and the host (natively) compute exactly the same partitions.
//!
//! - [`key_hash_partition`]: the Flink Pulsar connector's `key-hash` router,
//!   `Math.abs(murmur3_32(keyBytes, seed 0)) % n`, bit-exact, with the one hash Java gets wrong
//!   (`Integer.MIN_VALUE`) given a valid partition (see the function).
//! - [`java_default_partition`]: the Pulsar Java client's default routing of a keyed message
//!   (`RoundRobinPartitionMessageRouterImpl` with `JavaStringHash`): `signSafeMod(key.hashCode() &
//!   Integer.MAX_VALUE, n)`.
//! - [`Spreader`]: where messages without a key go (round-robin, per message or per batch).
//!
//! Every function takes `partitions >= 1`; 0 is treated as 1 (the host never asks for 0).

use std::fmt;

/// MurmurHash3 x86_32 of `data` with `seed` (Austin Appleby's reference; Guava's `murmur3_32_fixed`
/// and Pulsar's `Murmur3_32Hash` compute the same function over bytes).
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        h ^= mix(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .rev()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        h ^= mix(k);
    }
    // The length is mixed in modulo 2^32, as in the reference (Java lengths are ints anyway).
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The Flink connector's key hash as the Java `int` it works with:
/// `Hashing.murmur3_32(0).hashBytes(keyBytes).asInt()`.
pub fn flink_key_hash(key: &[u8]) -> i32 {
    murmur3_x86_32(key, 0) as i32
}

/// The `key-hash` router's partition for `key`: `|h| mod n` with `h` = [`flink_key_hash`].
///
/// For every hash but one this is exactly Java's `Math.abs(h) % n`. The exception is
/// `h == Integer.MIN_VALUE` (`0x80000000`), where Java's `Math.abs` overflows and stays negative, so
/// the reference computes `-(2^31 mod n)`: partition 0 when `n` divides 2^31 (n a power of two), a
/// negative partition that Pulsar rejects otherwise. We take the absolute value without overflow
/// (`unsigned_abs`), i.e. `2^31 mod n`: the same partition as the reference whenever the reference's
/// is valid (0 for every power of two), its magnitude otherwise. One 4-byte key with this hash is
/// `55 07 6f 83` (see the tests).
pub fn key_hash_partition(key: &[u8], partitions: u32) -> u32 {
    flink_key_hash(key).unsigned_abs() % partitions.max(1)
}

/// Java's `String.hashCode()` of `s`: `s[0]*31^(n-1) + ... + s[n-1]` over its UTF-16 code units,
/// in 32-bit two's complement.
pub fn java_string_hash_code(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Pulsar's `JavaStringHash.makeHash`: `s.hashCode() & Integer.MAX_VALUE`.
pub fn java_string_hash(s: &str) -> u32 {
    (java_string_hash_code(s) & i32::MAX) as u32
}

/// Pulsar's `MathUtils.signSafeMod`: the non-negative remainder of `dividend` by `divisor`.
pub fn sign_safe_mod(dividend: i64, divisor: u32) -> u32 {
    dividend.rem_euclid(i64::from(divisor.max(1))) as u32
}

/// Which string the Java client's default router would hash for a message key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyAs {
    /// The key bytes decoded as UTF-8: what a Java producer hashes for a key set with `.key(String)`
    /// (the routing vectors' `java_default` column). Invalid UTF-8 is decoded lossily (each invalid
    /// sequence becomes U+FFFD).
    #[default]
    String,
    /// The base64 text of the key bytes: what a Java producer hashes for a key set with
    /// `.keyBytes(byte[])` (`msg.getKey()` then returns the base64 text), as the Flink connector does.
    Base64,
}

impl KeyAs {
    pub const CHOICES: &[&str] = &["string", "base64"];

    pub fn parse(value: &str) -> Option<KeyAs> {
        match value {
            "string" => Some(KeyAs::String),
            "base64" => Some(KeyAs::Base64),
            _ => None,
        }
    }
}

/// The Java client's default routing of a keyed message: `signSafeMod(JavaStringHash(key), n)`.
pub fn java_default_partition(key: &[u8], key_as: KeyAs, partitions: u32) -> u32 {
    let hash = match key_as {
        KeyAs::String => java_string_hash(&String::from_utf8_lossy(key)),
        KeyAs::Base64 => java_string_hash(&base64(key)),
    };
    sign_safe_mod(i64::from(hash), partitions)
}

/// Standard base64 with padding (`java.util.Base64.getEncoder()`).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// How messages without a key are spread over the partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unkeyed {
    /// Each message without a key goes to the next partition.
    PerMessage,
    /// All messages without a key of one `route-batch` call go to the same partition; the next call
    /// that has any goes to the next one (batching-aware, like the Java client's time-sliced
    /// round-robin, but sliced per batch rather than per `partitionSwitchMs`).
    PerBatch,
}

impl Unkeyed {
    pub const CHOICES: &[&str] = &["per-message", "per-batch"];

    pub fn parse(value: &str) -> Option<Unkeyed> {
        match value {
            "per-message" => Some(Unkeyed::PerMessage),
            "per-batch" => Some(Unkeyed::PerBatch),
            _ => None,
        }
    }
}

/// The round-robin state of one router instance: the partition the next message (or batch) without
/// a key goes to is `next mod n`, counting from the `start-partition` option.
#[derive(Debug, Clone)]
pub struct Spreader {
    mode: Unkeyed,
    next: u64,
}

impl Spreader {
    pub fn new(mode: Unkeyed, start: u64) -> Spreader {
        Spreader { mode, next: start }
    }

    pub fn mode(&self) -> Unkeyed {
        self.mode
    }

    /// Routes a batch of `count` messages: `hashed(i)` is the partition of message `i` when it is
    /// routed by a hash (it has a key, or what stands for one), `None` when it has none and is spread.
    pub fn route(
        &mut self,
        count: usize,
        partitions: u32,
        mut hashed: impl FnMut(usize) -> Option<u32>,
    ) -> Vec<u32> {
        let n = u64::from(partitions.max(1));
        let batch_partition = (self.next % n) as u32;
        let mut spread_any = false;
        let parts = (0..count)
            .map(|i| {
                hashed(i).unwrap_or_else(|| {
                    spread_any = true;
                    match self.mode {
                        Unkeyed::PerBatch => batch_partition,
                        Unkeyed::PerMessage => {
                            let p = (self.next % n) as u32;
                            self.next = self.next.wrapping_add(1);
                            p
                        }
                    }
                })
            })
            .collect();
        if spread_any && self.mode == Unkeyed::PerBatch {
            self.next = self.next.wrapping_add(1);
        }
        parts
    }
}

/// A refused option, in the shape of the WIT `config-error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub option: Option<String>,
    pub message: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.option {
            Some(o) => write!(f, "option `{o}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for OptionError {}

/// The value of option `name`, if given (trimmed).
pub fn option<'a>(options: &'a [(String, String)], name: &str) -> Option<&'a str> {
    options
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim())
}

fn choice<T>(
    options: &[(String, String)],
    name: &str,
    default: T,
    parse: impl Fn(&str) -> Option<T>,
    choices: &[&str],
) -> Result<T, OptionError> {
    match option(options, name) {
        None | Some("") => Ok(default),
        Some(v) => parse(v).ok_or_else(|| OptionError {
            option: Some(name.to_owned()),
            message: format!("expected one of {}, got `{v}`", choices.join(", ")),
        }),
    }
}

/// Option `unkeyed` (`per-message` | `per-batch`), `default` when not given.
pub fn unkeyed_option(
    options: &[(String, String)],
    default: Unkeyed,
) -> Result<Unkeyed, OptionError> {
    choice(
        options,
        "unkeyed",
        default,
        Unkeyed::parse,
        Unkeyed::CHOICES,
    )
}

/// Option `key-as` (`string` | `base64`), `string` when not given.
pub fn key_as_option(options: &[(String, String)]) -> Result<KeyAs, OptionError> {
    choice(
        options,
        "key-as",
        KeyAs::String,
        KeyAs::parse,
        KeyAs::CHOICES,
    )
}

/// Option `start-partition`: a non-negative integer, 0 when not given.
pub fn start_option(options: &[(String, String)]) -> Result<u64, OptionError> {
    match option(options, "start-partition") {
        None | Some("") => Ok(0),
        Some(v) => v.parse::<u64>().map_err(|_| OptionError {
            option: Some("start-partition".to_owned()),
            message: format!("expected a non-negative integer, got `{v}`"),
        }),
    }
}

#[cfg(feature = "guest")]
pub mod guest;
#[cfg(any(test, feature = "vectors"))]
pub mod vectors;

#[cfg(test)]
mod tests;
