//! Retry policy of the connection/header phase: which HTTP answers are worth another try, and
//! how long to wait before it.

use std::time::Duration;

/// Backoff settings of the connection/header phase (before the provider accepted the
/// request). Defaults: up to 8 retries of HTTP 408/429/5xx and timeouts, 500 ms × 2^(n-1)
/// capped at 15 s plus up to 25 % jitter (`Retry-After` honoured up to the same cap); up to 3
/// retries of connection errors (refused, DNS, TLS), which rarely heal within seconds; and
/// never more than 90 s in all, so a dead provider fails the turn within about 90 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Retries after connection errors (connect refused, DNS failure, TLS handshake), at most
    /// `max_retries`.
    pub connect_retries: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Upper bound of any delay, including a server's `Retry-After`.
    pub max_delay: Duration,
    /// Time budget of the whole phase, waits and attempts together: no retry starts that
    /// would end its wait past it, and an attempt's wait for headers is cut at it.
    pub budget: Duration,
}

/// Default of [`RetryPolicy::max_retries`] (and `agent.provider_retries`).
pub const DEFAULT_RETRIES: u32 = 8;
/// Default of [`RetryPolicy::connect_retries`].
pub const DEFAULT_CONNECT_RETRIES: u32 = 3;
/// Default of [`RetryPolicy::budget`] in seconds (and `agent.provider_retry_seconds`).
pub const DEFAULT_BUDGET_SECS: u64 = 90;

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_RETRIES,
            connect_retries: DEFAULT_CONNECT_RETRIES,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(15),
            budget: Duration::from_secs(DEFAULT_BUDGET_SECS),
        }
    }
}

impl RetryPolicy {
    /// Delay before retry number `retry` (1-based). A server-sent `Retry-After` replaces the
    /// computed backoff (capped at `max_delay`).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max_delay);
        }
        let exp = retry.saturating_sub(1).min(30);
        let backoff = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        // Jitter spreads clients that failed together; never pushes past the cap by more
        // than a quarter.
        let jitter_ms = (backoff.as_millis() as u64) / 4;
        let jitter = if jitter_ms == 0 {
            0
        } else {
            rand::random::<u64>() % (jitter_ms + 1)
        };
        backoff + Duration::from_millis(jitter)
    }
}

/// What to do with a non-success HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// Transient: 408, 429 (rate limit), 5xx.
    Retry,
    /// 401/403: the key is wrong or lacks access; retrying cannot help.
    Auth,
    /// 402, or a 429 whose body says the balance/quota is exhausted.
    Quota,
    /// Any other status: the request itself is wrong.
    Fatal,
}

/// Classify a status using the response body (to tell quota exhaustion from rate limits).
pub fn classify_status(status: u16, body: &str) -> StatusClass {
    match status {
        401 | 403 => StatusClass::Auth,
        402 => StatusClass::Quota,
        429 if mentions_quota(body) => StatusClass::Quota,
        408 | 429 => StatusClass::Retry,
        500..=599 => StatusClass::Retry,
        _ => StatusClass::Fatal,
    }
}

fn mentions_quota(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    ["insufficient", "quota", "balance", "billing"]
        .iter()
        .any(|w| b.contains(w))
}

/// Parse an integer-seconds `Retry-After`. HTTP dates are ignored (the backoff applies).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy::default();
        assert!(p.connect_retries <= p.max_retries);
        for (n, base) in [
            (1u32, 500u64),
            (2, 1000),
            (3, 2000),
            (6, 15_000),
            (10, 15_000),
        ] {
            let d = p.delay(n, None).as_millis() as u64;
            assert!(d >= base && d <= base + base / 4, "retry {n}: {d} ms");
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(99))),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn classes() {
        assert_eq!(
            classify_status(429, "rate limit reached"),
            StatusClass::Retry
        );
        assert_eq!(
            classify_status(429, "Insufficient Balance"),
            StatusClass::Quota
        );
        assert_eq!(classify_status(503, ""), StatusClass::Retry);
        assert_eq!(classify_status(408, ""), StatusClass::Retry);
        assert_eq!(classify_status(401, ""), StatusClass::Auth);
        assert_eq!(classify_status(400, "bad"), StatusClass::Fatal);
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
