//! Prompt-size estimates: bytes of a request, turned into tokens with a ratio calibrated
//! against the `prompt_tokens` the provider reports.

use serde_json::Value;

/// Tokens per byte before the provider has reported anything (one token per 4 bytes, what
/// DeepSeek's tokenizer gives for code and English within a few per cent).
pub const DEFAULT_TOKENS_PER_BYTE: f64 = 0.25;

/// Bytes of one message as it is sent (its JSON text).
pub fn message_bytes(message: &Value) -> usize {
    message.to_string().len()
}

/// Bytes of a request's prompt: tool schemas, the system prompt and every message.
pub fn request_bytes(system: &str, tools: &[Value], messages: &[Value]) -> usize {
    let tools_bytes: usize = tools.iter().map(|t| t.to_string().len()).sum();
    // `{"role":"system","content":…}` around the prompt, escaped like the real one.
    let system_bytes = Value::String(system.to_string()).to_string().len() + 30;
    tools_bytes + system_bytes + messages.iter().map(message_bytes).sum::<usize>()
}

/// The session's byte → token ratio, calibrated by every usage report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimator {
    tokens_per_byte: f64,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator {
            tokens_per_byte: DEFAULT_TOKENS_PER_BYTE,
        }
    }
}

impl Estimator {
    /// Estimated tokens of `bytes` bytes (rounded up).
    pub fn tokens(&self, bytes: usize) -> u64 {
        (bytes as f64 * self.tokens_per_byte).ceil() as u64
    }

    /// Learn from a request of `bytes` bytes that the provider counted as `prompt_tokens`.
    /// The ratio follows the latest report (the session's content changes character over
    /// time: code, logs, prose), bounded so one odd report cannot make it absurd.
    pub fn observe(&mut self, bytes: usize, prompt_tokens: u64) {
        if bytes < 1024 || prompt_tokens == 0 {
            return;
        }
        let r = prompt_tokens as f64 / bytes as f64;
        self.tokens_per_byte = r.clamp(0.05, 1.5);
    }

    /// The current ratio.
    pub fn tokens_per_byte(&self) -> f64 {
        self.tokens_per_byte
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_follows_the_provider() {
        let mut e = Estimator::default();
        assert_eq!(e.tokens(4000), 1000);
        e.observe(10_000, 3_000);
        assert_eq!(e.tokens(4000), 1200);
        // Tiny requests and absurd reports do not move it far.
        e.observe(10, 1_000_000);
        assert_eq!(e.tokens(4000), 1200);
        e.observe(10_000, 1_000_000);
        assert_eq!(e.tokens_per_byte(), 1.5);
    }
}
