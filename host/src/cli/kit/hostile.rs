//! Hostile inputs: the vectors' own bytes truncated and mutated, random bytes (half of them drawn from the
//! bytes the vectors use, so a parser gets past its first check), and a few oversized or deeply nested
//! payloads. Deterministic for a seed.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Where an input came from (counted in the report, named when it fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Truncated,
    Mutated,
    Random,
    Oversized,
}

/// One hostile input with a description for failure messages.
#[derive(Debug, Clone)]
pub struct Input {
    pub origin: Origin,
    pub what: String,
    pub bytes: Vec<u8>,
}

/// Most cut points per corpus entry (all of them for short entries).
const CUTS: usize = 24;
/// Mutations per corpus entry.
const MUTATIONS: usize = 6;

/// The hostile inputs made from `corpus` (named byte strings) with `random` extra random ones.
pub fn inputs(corpus: &[(String, Vec<u8>)], random: usize, seed: u64) -> Vec<Input> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (name, bytes) in corpus {
        let n = bytes.len();
        let cuts: Vec<usize> = if n <= CUTS {
            (0..n).collect()
        } else {
            let mut c: Vec<usize> = (0..CUTS).map(|_| rng.random_range(0..n)).collect();
            c.extend([0, 1, n / 2, n - 1]);
            c.sort_unstable();
            c.dedup();
            c
        };
        for cut in cuts {
            out.push(Input {
                origin: Origin::Truncated,
                what: format!("`{name}` cut to {cut} of {n} bytes"),
                bytes: bytes[..cut].to_vec(),
            });
        }
        for m in 0..MUTATIONS {
            let mut b = bytes.clone();
            let what = match m % 3 {
                0 if !b.is_empty() => {
                    for _ in 0..rng.random_range(1..=4) {
                        let i = rng.random_range(0..b.len());
                        b[i] = rng.random();
                    }
                    "bytes replaced"
                }
                1 => {
                    let at = rng.random_range(0..=b.len());
                    let extra: Vec<u8> =
                        (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
                    b.splice(at..at, extra).for_each(drop);
                    "bytes inserted"
                }
                _ => {
                    let copy = b.clone();
                    b.extend_from_slice(&copy);
                    "doubled"
                }
            };
            out.push(Input {
                origin: Origin::Mutated,
                what: format!("`{name}` with {what}"),
                bytes: b,
            });
        }
    }
    let alphabet: Vec<u8> = {
        let mut a: Vec<u8> = corpus.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        a.sort_unstable();
        a.dedup();
        a
    };
    for i in 0..random {
        let len = if i % 10 == 0 {
            rng.random_range(0..4096)
        } else {
            rng.random_range(0..256)
        };
        let from_alphabet = i % 2 == 1 && !alphabet.is_empty();
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if from_alphabet {
                    alphabet[rng.random_range(0..alphabet.len())]
                } else {
                    rng.random()
                }
            })
            .collect();
        out.push(Input {
            origin: Origin::Random,
            what: format!(
                "random input {i} ({len} bytes{})",
                if from_alphabet {
                    ", the vectors' bytes"
                } else {
                    ""
                }
            ),
            bytes,
        });
    }
    let mut big = vec![0u8; 1 << 20];
    rng.fill(&mut big[..]);
    for (what, bytes) in [
        ("1 MiB of random bytes".to_owned(), big),
        ("100 000 `[`".to_owned(), vec![b'['; 100_000]),
        ("50 000 `{\"a\":`".to_owned(), b"{\"a\":".repeat(50_000)),
        ("a 1 MiB string".to_owned(), {
            let mut s = b"\"".to_vec();
            s.extend(std::iter::repeat_n(b'x', 1 << 20));
            s
        }),
    ] {
        out.push(Input {
            origin: Origin::Oversized,
            what,
            bytes,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_covering() {
        let corpus = vec![("v".to_owned(), b"{\"id\":1}".to_vec())];
        let a = inputs(&corpus, 10, 7);
        let b = inputs(&corpus, 10, 7);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().zip(&b).all(|(x, y)| x.bytes == y.bytes));
        for o in [
            Origin::Truncated,
            Origin::Mutated,
            Origin::Random,
            Origin::Oversized,
        ] {
            assert!(a.iter().any(|i| i.origin == o), "{o:?}");
        }
        assert!(a.iter().any(|i| i.bytes.is_empty()));
    }
}
