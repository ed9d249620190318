//! The object loop reads integers and strings without escapes itself (a fast path) and hands every
//! other token to the general value path: at the edges of the fast path (digit counts, leading zeros,
//! fractions, ranges, escapes, whitespace, the end of the payload, keys) the rows and errors are the
//! general path's.

use format_common::Value;
use format_common::golden;

/// Decodes one payload into (l BIGINT, i INT, s STRING); the row or the error reason.
fn one(json: &str) -> Result<Vec<Value>, String> {
    let rt = golden::row_type(&[
        ("l".into(), "BIGINT".into()),
        ("i".into(), "INT".into()),
        ("s".into(), "STRING".into()),
    ]);
    let d = json_format::decoder(&[], &rt).unwrap();
    let out = d.decode(&golden::messages(&[json.as_bytes()])).unwrap();
    match out.errors.first() {
        Some(e) => Err(e.reason.clone()),
        None => Ok(golden::rows(&rt, &out.rows).remove(0)),
    }
}

/// The value of column `col` (0 l, 1 i, 2 s) from `json_value`, read twice: as the only field (the
/// object loop's fast path) and in a row of all three fields in order (the whole-message fast path);
/// both must agree. Returns the whole row's.
fn field(col: usize, json_value: &str) -> Result<Value, String> {
    let mut row = ["0", "0", "\"x\""];
    row[col] = json_value;
    let names = ["l", "i", "s"];
    let alone = one(&format!(r#"{{"{}":{json_value}}}"#, names[col])).map(|r| r[col].clone());
    let full = one(&format!(
        r#"{{"l":{},"i":{},"s":{}}}"#,
        row[0], row[1], row[2]
    ))
    .map(|r| r[col].clone());
    match (&alone, &full) {
        (Ok(a), Ok(f)) => assert_eq!(a, f, "{json_value}"),
        (Err(_), Err(_)) => {}
        _ => panic!("{json_value}: alone {alone:?}, in a full row {full:?}"),
    }
    full
}

fn l(json_value: &str) -> Result<Value, String> {
    field(0, json_value)
}

fn i(json_value: &str) -> Result<Value, String> {
    field(1, json_value)
}

fn s(json_value: &str) -> Result<Value, String> {
    field(2, json_value)
}

fn err_has(r: Result<Value, String>, what: &str) {
    match r {
        Err(e) => assert!(e.contains(what), "{e:?} should mention {what:?}"),
        Ok(v) => panic!("{v:?}: expected an error mentioning {what:?}"),
    }
}

#[test]
fn integers_at_the_edges_of_the_fast_path() {
    for (text, want) in [
        ("0", 0),
        ("-0", 0),
        ("7", 7),
        ("-7", -7),
        ("12345678", 12_345_678),
        ("123456789", 123_456_789),
        ("-99999999", -99_999_999),
        ("123456789012345678", 123_456_789_012_345_678),
        ("-123456789012345678", -123_456_789_012_345_678),
        // Nineteen digits: the general path.
        ("9223372036854775807", i64::MAX),
        ("-9223372036854775808", i64::MIN),
        // A fraction or an exponent: the general path truncates.
        ("1.9", 1),
        ("-1.9", -1),
        ("1e2", 100),
        ("25E-1", 2),
        // Whitespace before and after the value.
        (" 42", 42),
        ("\t\n42 ", 42),
        // A string holding a number.
        ("\"42\"", 42),
    ] {
        assert_eq!(l(text), Ok(Value::I64(want)), "{text}");
    }
    assert_eq!(l("null"), Ok(Value::Null));
    err_has(l("9223372036854775808"), "out of range of BIGINT");
    err_has(l("007"), "leading zeroes");
    err_has(l("-"), "in a number");
    err_has(l("-x"), "in a number");
    err_has(l("1."), "decimal point");
    err_has(l("true"), "expected a number");
    err_has(l("12a"), "comma");
    // INT: its range, at both ends.
    assert_eq!(i("2147483647"), Ok(Value::I32(i32::MAX)));
    assert_eq!(i("-2147483648"), Ok(Value::I32(i32::MIN)));
    err_has(i("2147483648"), "out of range of INT");
    err_has(i("-2147483649"), "out of range of INT");
    err_has(i("123456789012345678"), "out of range of INT");
}

#[test]
fn integers_at_the_end_of_the_payload() {
    // Fewer than eight bytes after the number: the digits are read one at a time.
    assert_eq!(
        one(r#"{"s":"x","i":5,"l":1234567}"#),
        Ok(vec![
            Value::I64(1_234_567),
            Value::I32(5),
            Value::String("x".into())
        ])
    );
    let truncated = one(r#"{"l":123"#);
    assert!(
        truncated
            .as_ref()
            .is_err_and(|e| e.contains("end-of-input")),
        "{truncated:?}"
    );
}

#[test]
fn strings_at_the_edges_of_the_fast_path() {
    for (text, want) in [
        (r#""""#, ""),
        (r#""CREATED""#, "CREATED"),
        (r#""exactly8""#, "exactly8"),
        (r#""sixteen bytes!!""#, "sixteen bytes!!"),
        (
            r#""a longer string of more than sixteen bytes""#,
            "a longer string of more than sixteen bytes",
        ),
        (r#""gr\u00fcn""#, "grün"),
        ("\"grün\"", "grün"),
        (r#""a\"b""#, "a\"b"),
        (r#""tab\tand\\""#, "tab\tand\\"),
        (r#"  "spaced"  "#, "spaced"),
        // Not a string: the compact text of the value.
        ("12", "12"),
        ("{ \"a\" : [1, 2] }", "{\"a\":[1,2]}"),
    ] {
        assert_eq!(s(text), Ok(Value::String(want.into())), "{text}");
    }
    assert_eq!(s("null"), Ok(Value::Null));
    err_has(s("\"bad\u{1}control\""), "illegal unquoted character");
    err_has(s("\"unterminated"), "end of input");
}

#[test]
fn keys_match_by_their_decoded_name() {
    let row =
        |l: i64, i: i32, s: &str| Ok(vec![Value::I64(l), Value::I32(i), Value::String(s.into())]);
    // In order, out of order, escaped, with whitespace, unknown keys between, a duplicate (the last wins).
    assert_eq!(one(r#"{"l":1,"i":2,"s":"x"}"#), row(1, 2, "x"));
    assert_eq!(one(r#"{"s":"x","i":2,"l":1}"#), row(1, 2, "x"));
    assert_eq!(one(r#"{"\u006c":1,"\u0069":2,"s":"x"}"#), row(1, 2, "x"));
    assert_eq!(one("{ \"l\" : 1 , \"i\" :2,\"s\": \"x\" }"), row(1, 2, "x"));
    assert_eq!(
        one(r#"{"ll":9,"l":1,"lx":[1],"i":2,"s":"x","i":3}"#),
        row(1, 3, "x")
    );
    // A key that only starts like a field's name is not the field.
    assert_eq!(
        one(r#"{"l2":1,"i":2}"#),
        Ok(vec![Value::Null, Value::I32(2), Value::Null])
    );
    err_has(one(r#"{"l"#).map(|_| Value::Null), "end of input");
}

#[test]
fn batches_mixing_the_common_shape_and_others() {
    let rt = golden::row_type(&[("l".into(), "BIGINT".into()), ("s".into(), "STRING".into())]);
    let d = json_format::decoder(&[], &rt).unwrap();
    // Runs of messages in the common shape and of others (the fast path stops being tried after
    // many misses in a batch, and must give the same rows either way); bytes after the object.
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let mut want = Vec::new();
    for n in 0..60i64 {
        let (json, s) = match n / 10 {
            0 | 3 | 5 => (format!(r#"{{"l":{n},"s":"v{n}"}}"#), Some(format!("v{n}"))),
            1 => (format!(r#"{{"l":{n},"s":null}}"#), None),
            2 => (format!(r#"{{"s":"v{n}","l":{n}}}"#), Some(format!("v{n}"))),
            _ => (
                format!(r#"{{"l":{n},"s":"v{n}"}} trailing"#),
                Some(format!("v{n}")),
            ),
        };
        payloads.push(json.into_bytes());
        want.push(vec![Value::I64(n), s.map_or(Value::Null, Value::String)]);
    }
    // Invalid UTF-8 after the object fails the message, as on the general path.
    payloads.push(b"{\"l\":1,\"s\":\"x\"}\xff".to_vec());
    let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let out = d.decode(&golden::messages(&refs)).unwrap();
    assert_eq!(golden::rows(&rt, &out.rows), want);
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    assert_eq!(out.errors[0].index, 60);
    assert!(
        out.errors[0].reason.contains("invalid UTF-8"),
        "{:?}",
        out.errors
    );
}
