use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::vectors::{PARTITION_COUNTS, Vectors};
use super::*;

/// A 4-byte key whose murmur3 (seed 0) is `Integer.MIN_VALUE`, found by inverting the hash.
const MIN_VALUE_KEY: [u8; 4] = [0x55, 0x07, 0x6f, 0x83];

#[test]
fn murmur3_matches_known_values() {
    // Values from the reference connector's notes (docs: peer-connectors §6.1) and Appleby's suite.
    assert_eq!(murmur3_x86_32(b"", 0), 0);
    assert_eq!(murmur3_x86_32(b"", 1), 0x514e_28b7);
    assert_eq!(murmur3_x86_32(b"", 0xffff_ffff), 0x81f1_6f39);
    assert_eq!(murmur3_x86_32(b"hello", 0), 0x248b_fa47);
    assert_eq!(murmur3_x86_32(b"key1", 0), 0x9b97_0125);
    assert_eq!(murmur3_x86_32(b"user-42", 0), 0xb972_dad0);
    assert_eq!(murmur3_x86_32(b"test", 0), 0xba6b_d213);
    assert_eq!(murmur3_x86_32(b"Hello, world!", 0), 0xc036_3e43);
    // n = 6 partitions, from the same notes: hello -> 1, key1 -> 5, user-42 -> 2, "" -> 0.
    let six: Vec<u32> = [&b"hello"[..], b"key1", b"user-42", b""]
        .iter()
        .map(|k| key_hash_partition(k, 6))
        .collect();
    assert_eq!(six, [1, 5, 2, 0]);
}

#[test]
fn the_min_value_hash_gets_a_valid_partition() {
    assert_eq!(flink_key_hash(&MIN_VALUE_KEY), i32::MIN);
    for n in 1..=64u32 {
        let p = key_hash_partition(&MIN_VALUE_KEY, n);
        assert!(p < n);
        assert_eq!(p, ((1u64 << 31) % u64::from(n)) as u32, "{n} partitions");
        // Java: Math.abs(MIN_VALUE) % n == MIN_VALUE % n == -(2^31 mod n). Where that is a valid
        // partition (n a power of two: 0) we agree; elsewhere we return its magnitude.
        let java = i32::MIN % n as i32;
        if java >= 0 {
            assert_eq!(i64::from(p), i64::from(java));
        } else {
            assert_eq!(i64::from(p), -i64::from(java));
        }
    }
}

#[test]
fn java_string_hash_matches_java() {
    assert_eq!(java_string_hash_code(""), 0);
    assert_eq!(java_string_hash_code("abc"), 96_354);
    // "polygenelubricants".hashCode() == Integer.MIN_VALUE; JavaStringHash masks it to 0.
    assert_eq!(java_string_hash_code("polygenelubricants"), i32::MIN);
    assert_eq!(java_string_hash("polygenelubricants"), 0);
    // A supplementary character counts as two UTF-16 code units.
    assert_eq!(
        java_string_hash_code("🔑"),
        0xd83di32.wrapping_mul(31).wrapping_add(0xdd11)
    );
}

#[test]
fn sign_safe_mod_is_non_negative() {
    assert_eq!(sign_safe_mod(-1, 5), 4);
    assert_eq!(sign_safe_mod(-10, 5), 0);
    assert_eq!(sign_safe_mod(7, 5), 2);
    assert_eq!(sign_safe_mod(i64::MIN, 3), i64::MIN.rem_euclid(3) as u32);
    assert_eq!(sign_safe_mod(42, 0), 0, "0 partitions is treated as 1");
}

#[test]
fn base64_matches_the_standard_encoder() {
    let data: Vec<u8> = (0..=255u8).collect();
    for len in 0..70 {
        assert_eq!(base64(&data[..len]), STANDARD.encode(&data[..len]), "{len}");
    }
}

#[test]
fn key_hash_agrees_with_every_vector() {
    let agree = Vectors::load().check("key_hash", |keys, n| {
        keys.iter()
            .flatten()
            .map(|k| key_hash_partition(k, n))
            .collect()
    });
    assert_eq!(agree, 160_000);
}

#[test]
fn java_default_agrees_with_every_vector() {
    let agree = Vectors::load().check("java_default", |keys, n| {
        keys.iter()
            .flatten()
            .map(|k| java_default_partition(k, KeyAs::String, n))
            .collect()
    });
    assert_eq!(agree, 160_000);
}

#[test]
fn pulsar_murmur3_scheme_agrees_with_every_vector() {
    // Not a router of ours, but it pins murmur3 once more against Pulsar's own implementation.
    let v = Vectors::load();
    for n in PARTITION_COUNTS {
        for (key, want) in v.keys.iter().zip(v.column("java_murmur3", n)) {
            let hash = murmur3_x86_32(key, 0) & 0x7fff_ffff;
            assert_eq!(i64::from(sign_safe_mod(i64::from(hash), n)), want);
        }
    }
}

#[test]
fn base64_keys_hash_the_base64_text() {
    let key = [0xffu8, 0x00, 0x10];
    assert_eq!(base64(&key), "/wAQ");
    assert_eq!(
        java_default_partition(&key, KeyAs::Base64, 7),
        java_string_hash("/wAQ") % 7
    );
    // Base64 text of a UTF-8 key differs from the key: the two modes choose different partitions.
    let differ = (0..100)
        .map(|i| format!("key-{i}"))
        .filter(|k| {
            java_default_partition(k.as_bytes(), KeyAs::Base64, 16)
                != java_default_partition(k.as_bytes(), KeyAs::String, 16)
        })
        .count();
    assert!(differ > 50);
}

#[test]
fn per_message_spreading_rotates_every_unkeyed_message() {
    let mut s = Spreader::new(Unkeyed::PerMessage, 0);
    let keyed = |i: usize| i.is_multiple_of(3).then_some(9);
    assert_eq!(s.route(7, 4, keyed), [9, 0, 1, 9, 2, 3, 9]);
    // The rotation continues across batches.
    assert_eq!(s.route(3, 4, |_| None), [0, 1, 2]);
    let mut s = Spreader::new(Unkeyed::PerMessage, 5);
    assert_eq!(s.route(3, 4, |_| None), [1, 2, 3]);
}

#[test]
fn per_batch_spreading_moves_on_once_per_batch() {
    let mut s = Spreader::new(Unkeyed::PerBatch, 0);
    assert_eq!(s.route(4, 3, |_| None), [0, 0, 0, 0]);
    assert_eq!(s.route(3, 3, |i| (i == 1).then_some(2)), [1, 2, 1]);
    // A batch of keyed messages only does not move the rotation.
    assert_eq!(s.route(2, 3, |_| Some(0)), [0, 0]);
    assert_eq!(s.route(1, 3, |_| None), [2]);
    assert_eq!(s.route(1, 3, |_| None), [0]);
    // Spread over many batches, every partition gets the same number of batches.
    let mut s = Spreader::new(Unkeyed::PerBatch, 2);
    let mut per_partition = [0; 5];
    for _ in 0..50 {
        per_partition[s.route(10, 5, |_| None)[0] as usize] += 1;
    }
    assert_eq!(per_partition, [10; 5]);
}

#[test]
fn options_are_parsed_and_refused_clearly() {
    let opts = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(
        unkeyed_option(&opts(&[]), Unkeyed::PerBatch),
        Ok(Unkeyed::PerBatch)
    );
    assert_eq!(
        unkeyed_option(&opts(&[("unkeyed", "per-message")]), Unkeyed::PerBatch),
        Ok(Unkeyed::PerMessage)
    );
    let err = unkeyed_option(&opts(&[("unkeyed", "sticky")]), Unkeyed::PerBatch).unwrap_err();
    assert_eq!(err.option.as_deref(), Some("unkeyed"));
    assert_eq!(
        err.to_string(),
        "option `unkeyed`: expected one of per-message, per-batch, got `sticky`"
    );
    assert_eq!(key_as_option(&opts(&[])), Ok(KeyAs::String));
    assert_eq!(
        key_as_option(&opts(&[("key-as", "base64")])),
        Ok(KeyAs::Base64)
    );
    assert!(key_as_option(&opts(&[("key-as", "hex")])).is_err());
    assert_eq!(start_option(&opts(&[])), Ok(0));
    assert_eq!(start_option(&opts(&[("start-partition", " 3 ")])), Ok(3));
    assert!(start_option(&opts(&[("start-partition", "-1")])).is_err());
}
