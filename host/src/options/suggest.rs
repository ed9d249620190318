//! The one "did you mean" rule of every option, setting, column, format, plugin and connector name.

/// The nearest of `candidates` to `written`, if it is near enough to be what was meant: at most a third
/// of the longer name's characters (and at least 2) differ, compared case-insensitively.
pub fn suggest<'a>(
    written: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let w = written.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(&c.to_ascii_lowercase(), &w), c))
        .filter(|(d, c)| *d <= (c.len().max(written.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_suggestion_rule() {
        assert_eq!(suggest("jsn", ["avro", "csv", "json", "raw"]), Some("json"));
        assert_eq!(suggest("JSON", ["avro", "json"]), Some("json"));
        assert_eq!(suggest("protobuf", ["avro", "csv", "json", "raw"]), None);
    }
}
