//! The entry order of a printed MAP. Flink's converter turns a MAP value into a `java.util.HashMap` (put in entry
//! order) and `Row.toString` prints it in that map's iteration order, with duplicate keys collapsed (the first
//! key's place, the last value). This module computes the Java `hashCode()` of the key objects the converter
//! makes (`String`, `Integer`, `Long`, `Double`, `BigDecimal`, `LocalDate`, `Instant`, ...) and replays
//! `HashMap.put` — the 16-bucket start, doubling past 3/4 load, order-preserving splits, the resize instead of
//! treeifying a crowded bin in a table under 64 buckets — to get the same order.
//!
//! Not reproduced: keys whose Java hash is an identity hash (BINARY/BYTES → `byte[]`, ARRAY → `Object[]`) or
//! that are not hashed here (ROW, MAP keys): printed in entry order, without collapsing; and a bin of more than 8
//! colliding keys in a table of 64+ buckets, which Java turns into a tree (iterated root first).

use arrow::array::{Array, AsArray};
use arrow::datatypes::*;

use super::java_time;

/// The `hashCode()` of the Java object Flink makes of the key at `i` (`Some(0)` for NULL, as `HashMap.hash`),
/// `None` when it cannot be reproduced.
pub fn key_hash(keys: &dyn Array, i: usize) -> Option<i32> {
    if keys.is_null(i) {
        return Some(0);
    }
    Some(match keys.data_type() {
        DataType::Utf8 => string_hash(keys.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => string_hash(keys.as_string::<i64>().value(i)),
        DataType::Utf8View => string_hash(keys.as_string_view().value(i)),
        DataType::Boolean => {
            if keys.as_boolean().value(i) {
                1231
            } else {
                1237
            }
        }
        DataType::Int8 => i32::from(keys.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => i32::from(keys.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => keys.as_primitive::<Int32Type>().value(i),
        DataType::Int64 => java_time::long_hash(keys.as_primitive::<Int64Type>().value(i)),
        DataType::Float32 => {
            let v = keys.as_primitive::<Float32Type>().value(i);
            // Float.floatToIntBits: one canonical NaN
            if v.is_nan() {
                0x7fc0_0000
            } else {
                v.to_bits() as i32
            }
        }
        DataType::Float64 => {
            let v = keys.as_primitive::<Float64Type>().value(i);
            let bits = if v.is_nan() {
                0x7ff8_0000_0000_0000
            } else {
                v.to_bits() as i64
            };
            java_time::long_hash(bits)
        }
        DataType::Decimal128(_, scale) => {
            big_decimal_hash(keys.as_primitive::<Decimal128Type>().value(i), *scale)
        }
        DataType::Date32 => {
            java_time::local_date_hash(i64::from(keys.as_primitive::<Date32Type>().value(i)))
        }
        DataType::Time32(unit) => {
            let v = match unit {
                TimeUnit::Second => keys.as_primitive::<Time32SecondType>().value(i),
                _ => keys.as_primitive::<Time32MillisecondType>().value(i),
            };
            java_time::local_time_hash(java_time::nano_of_day(i64::from(v), *unit))
        }
        DataType::Time64(unit) => {
            let v = match unit {
                TimeUnit::Microsecond => keys.as_primitive::<Time64MicrosecondType>().value(i),
                _ => keys.as_primitive::<Time64NanosecondType>().value(i),
            };
            java_time::local_time_hash(java_time::nano_of_day(v, *unit))
        }
        DataType::Timestamp(unit, tz) => {
            let (secs, nanos) = java_time::split_epoch(timestamp_value(keys, i, *unit), *unit);
            if tz.is_some() {
                java_time::instant_hash(secs, nanos)
            } else {
                java_time::local_date_time_hash(secs, nanos)
            }
        }
        _ => return None,
    })
}

/// The raw value of a timestamp array at `i`, in its unit.
pub fn timestamp_value(col: &dyn Array, i: usize, unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => col.as_primitive::<TimestampSecondType>().value(i),
        TimeUnit::Millisecond => col.as_primitive::<TimestampMillisecondType>().value(i),
        TimeUnit::Microsecond => col.as_primitive::<TimestampMicrosecondType>().value(i),
        TimeUnit::Nanosecond => col.as_primitive::<TimestampNanosecondType>().value(i),
    }
}

/// `String.hashCode()`: over UTF-16 code units.
fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `BigDecimal.hashCode()` = 31 × (signum × `BigInteger.hashCode` of the unscaled magnitude) + scale.
fn big_decimal_hash(unscaled: i128, scale: i8) -> i32 {
    let magnitude = unscaled.unsigned_abs();
    // the magnitude's 32-bit words, most significant first, without leading zero words
    let (mut h, mut started) = (0i32, false);
    for shift in [96, 64, 32, 0] {
        let word = (magnitude >> shift) as u32;
        started |= word != 0;
        if started {
            h = h.wrapping_mul(31).wrapping_add(word as i32);
        }
    }
    let signed = if unscaled < 0 { h.wrapping_neg() } else { h };
    signed.wrapping_mul(31).wrapping_add(i32::from(scale))
}

/// Iteration order of a `HashMap` filled by putting the keys in order: `(key entry, value entry)` pairs, one per
/// distinct key. `hashes[i]` is the key's Java hash, `keys[i]` its text (equal text = equal key for the types
/// hashed here). With any `None` hash the entries are returned as they are.
pub fn iteration_order(hashes: &[Option<i32>], keys: &[String]) -> Vec<(usize, usize)> {
    let Some(hashes) = hashes.iter().copied().collect::<Option<Vec<i32>>>() else {
        return (0..keys.len()).map(|i| (i, i)).collect();
    };
    // HashMap.hash: the high half folded into the low half
    let spread: Vec<u32> = hashes
        .iter()
        .map(|&h| (h as u32) ^ ((h as u32) >> 16))
        .collect();
    let mut value_of: Vec<usize> = (0..keys.len()).collect();
    let mut table: Vec<Vec<usize>> = Vec::new();
    let mut size = 0usize;
    for i in 0..keys.len() {
        if table.is_empty() {
            table = vec![Vec::new(); 16];
        }
        let bucket = (spread[i] as usize) & (table.len() - 1);
        if let Some(&first) = table[bucket]
            .iter()
            .find(|&&j| spread[j] == spread[i] && keys[j] == keys[i])
        {
            value_of[first] = i;
            continue;
        }
        let before = table[bucket].len();
        table[bucket].push(i);
        // TREEIFY_THRESHOLD: a table under 64 buckets grows instead (bigger tables treeify: not reproduced)
        if before >= 8 && table.len() < 64 {
            table = resize(table, &spread);
        }
        size += 1;
        if size > table.len() / 4 * 3 {
            table = resize(table, &spread);
        }
    }
    table
        .into_iter()
        .flatten()
        .map(|i| (i, value_of[i]))
        .collect()
}

/// `HashMap.resize`: twice the buckets; each bin splits into "lo" (same index) and "hi" (+ old size), in order.
fn resize(table: Vec<Vec<usize>>, spread: &[u32]) -> Vec<Vec<usize>> {
    let old = table.len();
    let mut grown = vec![Vec::new(); old * 2];
    for (j, bin) in table.into_iter().enumerate() {
        for i in bin {
            let target = if (spread[i] as usize) & old == 0 {
                j
            } else {
                j + old
            };
            grown[target].push(i);
        }
    }
    grown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes() {
        // printed by Java 17
        assert_eq!(string_hash("ключ"), 33_309_882);
        assert_eq!(string_hash("😀"), 1_772_899);
        assert_eq!(big_decimal_hash(12_345, 2), 382_697);
        assert_eq!(big_decimal_hash(-1, 2), -29);
        assert_eq!(
            big_decimal_hash(12_345_678_901_234_567_890_123_456_789_012_345_678, 18),
            -880_932_649
        );
        assert_eq!(
            big_decimal_hash(-99_999_999_999_999_999_999_999_999_999_999_999_999, 18),
            427_198_404
        );
    }

    /// `HashMap<String, Integer>` with "k" + (i * 7919 % 101) put for i in 0..40 (two resizes), as Java 17 prints it.
    #[test]
    fn hash_map_order_after_resizes() {
        let keys: Vec<String> = (0..40).map(|i| format!("k{}", i * 7919 % 101)).collect();
        let hashes: Vec<Option<i32>> = keys.iter().map(|k| Some(string_hash(k))).collect();
        let printed: Vec<String> = iteration_order(&hashes, &keys)
            .into_iter()
            .map(|(k, v)| format!("{}={v}", keys[k]))
            .collect();
        assert_eq!(
            printed.join(", "),
            "k91=17, k50=16, k72=19, k94=22, k31=18, k53=21, k75=24, k97=27, k12=20, k34=23, k56=26, \
             k78=29, k15=25, k37=28, k59=31, k18=30, k100=32, k82=2, k0=0, k81=34, k40=33, k62=36, k84=39, \
             k2=37, k3=5, k41=1, k63=4, k85=7, k22=3, k44=6, k66=9, k88=12, k6=10, k21=35, k43=38, k9=15, \
             k25=8, k47=11, k69=14, k28=13"
        );
    }

    #[test]
    fn duplicate_keys_keep_the_first_place_and_the_last_value() {
        let keys: Vec<String> = ["a", "b", "a"].map(String::from).to_vec();
        let hashes: Vec<Option<i32>> = keys.iter().map(|k| Some(string_hash(k))).collect();
        assert_eq!(iteration_order(&hashes, &keys), vec![(0, 2), (1, 1)]);
        assert_eq!(
            iteration_order(&[None, Some(1)], &keys[..2]),
            vec![(0, 0), (1, 1)]
        );
    }
}
