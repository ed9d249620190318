//! Java's `Float.toString(float)` and `Double.toString(double)` as the JDKs Flink 1.18 runs on (8, 11, 17) print
//! them: `0.1`, `1.0E7`, `3.4028235E38`, `1.4E-45`, `-0.0`, `NaN`, `-Infinity`.
//!
//! Those JDKs use `jdk.internal.math.FloatingDecimal` (replaced in JDK 19, JDK-4511638), whose digits are *not*
//! always the shortest that round-trip: `1.0E23` prints `9.999999999999999E22`, `2.82879384806159E17` prints
//! `2.82879384806159008E17`. The json and csv formats write FLOAT/DOUBLE the same way, so there is one port of that
//! algorithm for the project, `guest-formats/common/src/javanum.rs` (std only), compiled into the host as it is.
//! Checked here against 7114 values printed by Java 17 (`tests/golden/vectors/print/float-to-string.txt`, test
//! `golden_print`) and the table below.

#[allow(dead_code)] // its parsers serve the formats
#[path = "../../../../guest-formats/common/src/javanum.rs"]
mod javanum;

/// `Float.toString(v)`: FLOAT is formatted from its own 24-bit significand, never widened to a double.
pub fn float_to_string(v: f32) -> String {
    let mut out = Vec::with_capacity(16);
    javanum::write_f32(v, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `Double.toString(v)`.
pub fn double_to_string(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    javanum::write_f64(v, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_text_as_java() {
        for (v, text) in [
            (0.1f32, "0.1"),
            (1.0e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (f32::MAX, "3.4028235E38"),
            (f32::from_bits(1), "1.4E-45"),
            (f32::MIN_POSITIVE, "1.17549435E-38"),
            (0.001, "0.001"),
            (9.99e-4, "9.99E-4"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            (1.234_567_9e8, "1.23456792E8"),
            (1.0 / 3.0, "0.33333334"),
            (f32::NAN, "NaN"),
            (f32::INFINITY, "Infinity"),
            (f32::NEG_INFINITY, "-Infinity"),
            (1.0e-44, "9.8E-45"),
        ] {
            assert_eq!(float_to_string(v), text, "{v:e}");
        }
    }

    #[test]
    fn double_text_as_java_17() {
        for (v, text) in [
            (0.1f64, "0.1"),
            (0.1f32 as f64, "0.10000000149011612"),
            (1.0e7, "1.0E7"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::from_bits(1), "4.9E-324"),
            (0.001, "0.001"),
            (9.99e-4, "9.99E-4"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (100.0, "100.0"),
            (1.23456789e8, "1.23456789E8"),
            (0.30000000000000004, "0.30000000000000004"),
            (9_223_372_036_854_775_807.0, "9.223372036854776E18"),
            // FloatingDecimal's longer-than-shortest outputs (JDK-4511638), kept as Java 17 prints them
            (1.0e23, "9.999999999999999E22"),
            (2.82879384806159e17, "2.82879384806159008E17"),
            (2f64.powi(57), "1.44115188075855872E17"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(double_to_string(v), text, "{v:e}");
        }
    }
}
