//! Sizes for people: the one formatter behind every message, panel and report that names a
//! number of bytes (host and laptop alike).

/// `12 B`, `1.5 KiB`, `32 MiB`, `1 GiB`: binary units, one decimal unless the value is whole
/// (to a twentieth).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if (v - v.round()).abs() < 0.05 {
        format!("{} {}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(32 << 20), "32 MiB");
        assert_eq!(bytes(3_460_300), "3.3 MiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(5 << 40), "5 TiB");
        assert_eq!(bytes(u64::MAX), "16777216 TiB");
    }
}
