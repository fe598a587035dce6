//! MCP elicitations over ACP: ACP has no forms, so an elicitation is put to the editor as a
//! `session/request_permission` naming the server, its message and the fields. "Accept" is
//! offered when every required field has a default (the defaults are sent); otherwise only
//! "Decline" is, and the title says the form must be filled in the TUI.

use super::*;
use reasonix_forward::proto::ElicitAction;

const ACCEPT: &str = "elicit_accept";
const DECLINE: &str = "elicit_decline";

/// The defaults of `schema`, or `None` when a required field has none.
fn defaults(schema: &Value) -> Option<serde_json::Map<String, Value>> {
    let props = schema.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (name, p) in props {
        match p.get("default") {
            Some(d) => {
                out.insert(name.clone(), d.clone());
            }
            None if required.contains(&name.as_str()) => return None,
            None => {}
        }
    }
    Some(out)
}

impl Actor {
    pub(super) fn ask_elicitation(
        &self,
        elicitation_id: String,
        server: &str,
        message: &str,
        schema: &str,
    ) {
        let Some(session) = self.session.clone() else {
            return;
        };
        let schema: Value = serde_json::from_str(schema).unwrap_or(Value::Null);
        let fields: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let accept_with = defaults(&schema);
        let mut title = format!("MCP server `{server}` asks: {}", message.trim());
        if !fields.is_empty() {
            title.push_str(&format!(" (fields: {})", fields.join(", ")));
        }
        let mut options = Vec::new();
        match &accept_with {
            Some(_) => options.push(acp::PermissionOption::new(
                ACCEPT,
                if fields.is_empty() {
                    "Accept"
                } else {
                    "Accept with the defaults"
                },
                acp::PermissionOptionKind::AllowOnce,
            )),
            None => title.push_str(
                "; this editor cannot fill forms: answer it in the reasonix TUI, or decline",
            ),
        }
        options.push(acp::PermissionOption::new(
            DECLINE,
            "Decline",
            acp::PermissionOptionKind::RejectOnce,
        ));
        let call = acp::ToolCallUpdate::new(
            elicitation_id.clone(),
            acp::ToolCallUpdateFields::new().title(title),
        );
        let request = acp::RequestPermissionRequest::new(session, call, options);
        let peer = self.peer.clone();
        let client = self.client.clone();
        tokio::spawn(async move {
            let answer = peer.request("session/request_permission", &request).await;
            let accepted = matches!(
                answer.ok().and_then(|v| serde_json::from_value::<acp::RequestPermissionResponse>(v).ok()),
                Some(r) if matches!(&r.outcome, acp::RequestPermissionOutcome::Selected(s) if s.option_id.0.as_ref() == ACCEPT)
            );
            let (action, content) = match (accepted, accept_with) {
                (true, Some(values)) => (ElicitAction::Accept, Some(values)),
                _ => (ElicitAction::Decline, None),
            };
            let req = Request::AnswerElicitation {
                request_id: format!("acp-elicit-{elicitation_id}"),
                elicitation_id,
                action,
                content,
            };
            if let Err(e) = client.request(req).await {
                tracing::info!("elicitation answer not applied: {e}");
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_a_form_only_when_every_required_field_has_one() {
        let s = serde_json::json!({"properties": {"a": {"type": "string", "default": "x"}, "b": {"type": "string"}}, "required": ["a"]});
        assert_eq!(
            Value::Object(defaults(&s).unwrap()),
            serde_json::json!({"a": "x"})
        );
        let s = serde_json::json!({"properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert!(defaults(&s).is_none());
    }
}
