//! Standard base64 with padding (what Jackson writes for binary values).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the base64 of `input` to `out`.
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    let mut chunks = input.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            ALPHABET[(n >> 18) as usize & 63],
            ALPHABET[(n >> 12) as usize & 63],
            ALPHABET[(n >> 6) as usize & 63],
            ALPHABET[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[
                ALPHABET[(n >> 18) as usize & 63],
                ALPHABET[(n >> 12) as usize & 63],
                ALPHABET[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}

fn value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// Decodes padded standard base64 into `out`; an error names what is wrong.
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    if !input.len().is_multiple_of(4) {
        return Err(format!(
            "invalid base64: length {} is not a multiple of 4",
            input.len()
        ));
    }
    let n = input.len() / 4;
    for (i, q) in input.chunks_exact(4).enumerate() {
        let last = i + 1 == n;
        let pad = if last {
            q.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return Err("invalid base64 padding".into());
        }
        let mut v = 0u32;
        for (j, &c) in q.iter().enumerate() {
            let d = if j >= 4 - pad {
                0
            } else {
                value(c).ok_or_else(|| format!("invalid base64 character {:?}", c as char))?
            };
            v = (v << 6) | d;
        }
        out.push((v >> 16) as u8);
        if pad < 2 {
            out.push((v >> 8) as u8);
        }
        if pad < 1 {
            out.push(v as u8);
        }
    }
    Ok(())
}
