//! A small, seeded mutator for the stable test run: not coverage-guided (libFuzzer is, see
//! `fuzz/run.sh`), but it takes every corpus entry through thousands of nearby inputs in
//! every `cargo nextest` run, reproducibly.

/// xorshift64*: deterministic for a seed, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is replaced, xorshift cannot leave it).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Bytes that parsers treat specially: frame kinds and lengths, quotes, shell operators,
/// JSON and SSE punctuation, line ends, the preamble magic, a UTF-8 lead byte.
const TOKENS: &[&[u8]] = &[
    b"\0",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x11",
    b"\x03",
    b"\n",
    b"\r\n",
    b"\"",
    b"'",
    b"\\",
    b"`",
    b"$(",
    b")",
    b"${",
    b";",
    b"&&",
    b"||",
    b"|",
    b">",
    b"<(",
    b"*",
    b"[",
    b"]",
    b"{",
    b"}",
    b":",
    b",",
    b"=",
    b"!",
    b"#",
    b"~",
    b"data: ",
    b"[DONE]",
    b"REASONIX-LINK/",
    b"Include ",
    b"Host ",
    b"Match ",
    b"|1|",
    b"@revoked ",
    b"Bash(",
    b":*)",
    b"\"id\":",
    b"\"method\":",
    b"\xe2\x82",
    b">>>",
];

/// Returns a mutant of `input`, sometimes spliced with `other`, at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = v.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next_u64() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(i..i, t.iter().copied());
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                v.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(32)).min(len);
                let piece: Vec<u8> = v[a..b].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, piece);
            }
            5 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            6 if len > 0 => {
                v.truncate(rng.below(len));
            }
            _ => {
                let i = rng.below(len + 1);
                v.insert(i, rng.next_u64() as u8);
            }
        }
    }
    v.truncate(max_len);
    v
}
