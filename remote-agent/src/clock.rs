//! Wall-clock timestamps as the host writes them: RFC 3339 in UTC with milliseconds (journal
//! events, checkpoints, the trash, terminals) and a compact form safe in file names. The
//! formatting is `humantime`'s; nothing here does calendar arithmetic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The last millisecond RFC 3339's four-digit years can write (9999-12-31T23:59:59.999Z).
/// Later values (only a corrupt record holds one) are written as this, never a panic.
const LAST_MS: u64 = 253_402_300_799_999;

/// Milliseconds since the epoch (0 for a clock set before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `ms` milliseconds after the epoch as RFC 3339 UTC, e.g. `2026-12-03T18:04:05.678Z`.
pub fn rfc3339_ms(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.min(LAST_MS));
    humantime::format_rfc3339_millis(t).to_string()
}

/// `secs` seconds after the epoch as RFC 3339 UTC (milliseconds `.000`).
pub fn rfc3339_secs(secs: u64) -> String {
    rfc3339_ms(secs.saturating_mul(1000))
}

/// The current time as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339_ms(now_ms())
}

/// `YYYYMMDDTHHMMSSmmmZ`: the RFC 3339 form without its separators, safe in file names and
/// sorting like the time it names.
pub fn compact_timestamp(ms: u64) -> String {
    rfc3339_ms(ms)
        .chars()
        .filter(|c| !matches!(c, '-' | ':' | '.'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU `date` is the oracle: a few hundred instants spread over the whole range (leap
    /// days, century rules, the epoch, the last writable second) formatted by both.
    #[test]
    fn timestamps_agree_with_gnu_date() {
        let mut ms: Vec<u64> = vec![
            0,
            999,
            951_782_400_123,   // 2000-02-29
            4_107_542_399_000, // 2100-02-28T23:59:59
            4_107_542_400_000, // 2100-03-01 (no leap day in 2100)
            1_796_043_600_000, // 2026-11-30T13:00:00
            LAST_MS,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..400 {
            // xorshift: deterministic, spread over 1970..=9999.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ms.push(x % (LAST_MS + 1));
        }
        let input: String = ms.iter().map(|m| format!("@{}\n", m / 1000)).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("instants");
        std::fs::write(&file, input).expect("write");
        let out = std::process::Command::new("date")
            .args(["-u", "-f"])
            .arg(&file)
            .arg("+%Y-%m-%dT%H:%M:%S")
            .output()
            .expect("GNU date runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(want.len(), ms.len());
        for (m, w) in ms.iter().zip(&want) {
            assert_eq!(rfc3339_ms(*m), format!("{w}.{:03}Z", m % 1000), "{m} ms");
        }
        assert_eq!(compact_timestamp(1_700_000_000_000), "20231114T221320000Z");
        assert_eq!(rfc3339_secs(951_782_400), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_corrupt_huge_timestamp_is_written_as_the_last_one_not_a_panic() {
        assert_eq!(rfc3339_ms(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_secs(u64::MAX), "9999-12-31T23:59:59.999Z");
    }
}
