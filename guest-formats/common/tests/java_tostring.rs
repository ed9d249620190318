//! `javanum::write_f64` / `write_f32` against Java 17's `Double.toString` / `Float.toString`
//! (tests/data/java17-tostring.txt: `javac Gen.java && java Gen 6000` in tests/data on OpenJDK
//! 17.0.15: random bits, short decimals, powers of two, subnormals, integers, the usual suspects).

use format_common::javanum::{write_f32, write_f64};

#[test]
fn matches_java17_tostring() {
    let text = include_str!("data/java17-tostring.txt");
    let mut bad = Vec::new();
    let mut n = 0;
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (kind, hex, want) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let mut out = Vec::new();
        if kind == "d" {
            write_f64(
                f64::from_bits(u64::from_str_radix(hex, 16).unwrap()),
                &mut out,
            );
        } else {
            write_f32(
                f32::from_bits(u32::from_str_radix(hex, 16).unwrap()),
                &mut out,
            );
        }
        n += 1;
        let got = String::from_utf8(out).unwrap();
        if got != want {
            bad.push(format!("{kind} {hex}: ours {got}, java {want}"));
        }
    }
    for b in bad.iter().take(30) {
        eprintln!("{b}");
    }
    assert!(bad.is_empty(), "{} of {n} differ", bad.len());
}
