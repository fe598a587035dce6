//! Prompt-size estimates: bytes of a request, turned into tokens with a ratio calibrated
//! against the `prompt_tokens` the provider reports.

use serde_json::Value;

/// Tokens per byte before the provider has reported anything (one token per 4 bytes, what
/// DeepSeek's tokenizer gives for code and English within a few per cent).
pub const DEFAULT_TOKENS_PER_BYTE: f64 = 0.25;

/// Bytes of one message as it is sent (its JSON text), counted without building the text.
pub fn message_bytes(message: &Value) -> usize {
    json_len(message)
}

/// Length of `value`'s compact JSON text (what `to_string()` would give), counted by a
/// writer that keeps nothing: measuring a long conversation before every request allocates
/// nothing.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // `Count` never errs, and the values measured here (messages, strings) always serialise.
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

/// Bytes of a request's prompt: tool schemas, the system prompt and every message.
pub fn request_bytes(system: &str, tools: &[Value], messages: &[Value]) -> usize {
    let tools_bytes: usize = tools.iter().map(json_len).sum();
    // `{"role":"system","content":…}` around the prompt, escaped like the real one.
    let system_bytes = json_len(system) + 30;
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
    fn json_len_is_the_length_of_the_text() {
        let v = serde_json::json!({"role": "tool", "content": "a\n\"b\" → ü", "n": [1, 2.5, null]});
        assert_eq!(json_len(&v), v.to_string().len());
        assert_eq!(
            json_len("a\tb"),
            Value::String("a\tb".into()).to_string().len()
        );
    }

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
