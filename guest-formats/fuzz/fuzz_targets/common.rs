// Shared by the fuzz targets (included with `include!`).
use format_common::golden;
use format_common::{DecodedBatch, MessageBatch, RowType};

/// Splits the fuzz input: first byte picks the option set, the rest is one payload, and the same
/// bytes split at their middle are two more messages.
fn run(data: &[u8], sets: &[(&str, Vec<(String, String)>)], decode: &dyn Fn(&[(String, String)], &RowType, &MessageBatch) -> Option<DecodedBatch>) {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let (cols, options) = &sets[pick as usize % sets.len()];
    let rt = golden::row_type(&parse_cols(cols));
    let (a, b) = payload.split_at(payload.len() / 2);
    let batch = golden::messages(&[payload, a, b]);
    if let Some(d) = decode(options, &rt, &batch) {
        assert_eq!(d.rows.row_count as usize + d.errors.len(), 3);
        golden::rows(&rt, &d.rows);
    }
}

fn parse_cols(spec: &str) -> Vec<(String, String)> {
    spec.split(';')
        .map(|c| {
            let (n, t) = c.split_once(' ').unwrap();
            (n.to_owned(), t.to_owned())
        })
        .collect()
}

fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}
