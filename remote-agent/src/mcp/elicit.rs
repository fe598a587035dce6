//! Elicitation (`elicitation/create`, form mode): a server asks the user for a few values in
//! the middle of a tool call. The client advertises `{"elicitation": {"form": {}}}`; the
//! request goes to the [`Elicitor`] of the call in flight (the session, which asks whoever
//! drives it), and the answer (`accept` with `content`, `decline` or `cancel`) goes back to
//! the server. With nobody to ask (no call in flight, a headless run) the answer is `decline`.

use std::future::Future;
use std::pin::Pin;

use serde_json::{json, Value};

/// What an elicitation asks: the server's message and the flat object schema of the form.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitRequest {
    /// The server's name (as configured).
    pub server: String,
    /// What the server says it wants.
    pub message: String,
    /// `requestedSchema`: `{"type":"object","properties":{…},"required":[…]}`.
    pub schema: Value,
}

/// The user's answer, as MCP's `ElicitResult`.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// The form was submitted with these values.
    Accept(serde_json::Map<String, Value>),
    /// The user said no.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

impl ElicitAnswer {
    /// The `elicitation/create` result.
    pub fn to_result(&self) -> Value {
        match self {
            ElicitAnswer::Accept(content) => json!({"action": "accept", "content": content}),
            ElicitAnswer::Decline => json!({"action": "decline"}),
            ElicitAnswer::Cancel => json!({"action": "cancel"}),
        }
    }
}

/// A future answer.
pub type ElicitFuture = Pin<Box<dyn Future<Output = ElicitAnswer> + Send>>;

/// Who answers a server's elicitation during a call.
pub trait Elicitor: Send + Sync {
    /// Asks the user; resolves when they answered (or when nobody can).
    fn elicit(&self, request: ElicitRequest) -> ElicitFuture;
}

/// Nobody to ask: every elicitation is declined.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoElicitor;

impl Elicitor for NoElicitor {
    fn elicit(&self, _request: ElicitRequest) -> ElicitFuture {
        Box::pin(async { ElicitAnswer::Decline })
    }
}

/// The request's form, or why it cannot be shown (`url` mode, not a flat object schema).
pub fn parse_request(server: &str, params: &Value) -> Result<ElicitRequest, String> {
    let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
    if mode != "form" {
        return Err(format!(
            "elicitation mode `{mode}` is not supported (only `form`)"
        ));
    }
    let schema = params
        .get("requestedSchema")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let props = schema.get("properties").and_then(Value::as_object);
    let Some(props) = props else {
        return Err("`requestedSchema` has no `properties` object".into());
    };
    for (name, p) in props {
        let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "string" | "number" | "integer" | "boolean") {
            return Err(format!(
                "field `{name}` has type `{ty}`; a form takes string, number, integer and boolean fields only"
            ));
        }
    }
    Ok(ElicitRequest {
        server: server.to_string(),
        message: params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        schema,
    })
}
