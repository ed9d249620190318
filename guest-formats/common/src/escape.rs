//! Java string escapes in option values, as Flink reads `'csv.field-delimiter' = '\t'`
//! (commons-lang3 `StringEscapeUtils.unescapeJava`): `\t \n \r \f \b \\ \' \"`, octal `\0`–`\377`,
//! `\uXXXX` (also `\uuXXXX`); a backslash before any other character is dropped.

/// The value with its Java escapes replaced; `Err` names the malformed `\u` escape.
pub fn unescape_java(value: &str) -> Result<String, String> {
    let chars: Vec<char> = value.chars().collect();
    let mut out = String::with_capacity(value.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 == chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let next = chars[i + 1];
        i += 2;
        match next {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'b' => out.push('\u{8}'),
            'u' => {
                while chars.get(i) == Some(&'u') {
                    i += 1;
                }
                let hex: String = chars.iter().skip(i).take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("'\\u{hex}' is not a \\uXXXX escape"))?;
                // A lone surrogate cannot be one char here; Java would keep it as half a pair.
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                i += 4;
            }
            '0'..='7' => {
                // Up to three octal digits, at most \377 (a first digit above 3 takes two).
                let max = if next <= '3' { 3 } else { 2 };
                let mut code = next.to_digit(8).unwrap_or(0);
                let mut taken = 1;
                while taken < max
                    && let Some(d) = chars.get(i).and_then(|c| c.to_digit(8))
                {
                    code = code * 8 + d;
                    i += 1;
                    taken += 1;
                }
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::unescape_java;

    #[test]
    fn java_escapes() {
        assert_eq!(unescape_java(r"\t").unwrap(), "\t");
        assert_eq!(unescape_java(r"\\").unwrap(), "\\");
        assert_eq!(unescape_java(r"a\nb\r").unwrap(), "a\nb\r");
        assert_eq!(unescape_java(r"\u0009").unwrap(), "\t");
        assert_eq!(unescape_java(r"\uu00e9").unwrap(), "é");
        assert_eq!(unescape_java(r"\001").unwrap(), "\u{1}");
        assert_eq!(unescape_java(r"\377x").unwrap(), "\u{ff}x");
        assert_eq!(unescape_java(r"\47").unwrap(), "'");
        assert_eq!(unescape_java(r#"\'\""#).unwrap(), "'\"");
        assert_eq!(unescape_java(r"\x").unwrap(), "x");
        assert_eq!(unescape_java("\\").unwrap(), "\\");
        assert_eq!(unescape_java(";").unwrap(), ";");
        assert_eq!(unescape_java("\t").unwrap(), "\t");
        assert!(unescape_java(r"\u12").is_err());
    }
}
