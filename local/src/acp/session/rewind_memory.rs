//! `/rewind N` from the editor (#32): the rewind itself, then, when turns N and later wrote
//! memory facts, the same offer as the TUI's: a `session/request_permission` asking whether
//! to forget them too ("Forget" archives them, recoverable with `reasonix memory restore`;
//! "Keep" leaves them). The project facts are archived on the host through the link, the
//! global ones in this laptop's store.

use super::*;

const FORGET: &str = "rewind_forget_facts";
const KEEP: &str = "rewind_keep_facts";

impl Actor {
    pub(super) fn rewind_command(&mut self, id: Value, to_turn: u64, scope: RewindScope) {
        let mut facts: Vec<String> = Vec::new();
        for (turn, fact) in &self.remembered {
            if *turn >= to_turn && !facts.contains(fact) {
                facts.push(fact.clone());
            }
        }
        let client = self.client.clone();
        let done = self.done.clone();
        let peer = self.peer.clone();
        let session = self.session.clone();
        let home = self.home.clone();
        tokio::spawn(async move {
            let req = Request::Rewind {
                request_id: format!("acp-rewind-{:016x}", rand::random::<u64>()),
                to_turn,
                scope,
                dry_run: false,
            };
            let mut text = match client.request(req).await {
                Ok(Response::Rewound { summary, paths }) => {
                    let mut text = summary;
                    for p in paths {
                        text.push_str(&format!("\n- {p}"));
                    }
                    text
                }
                Ok(other) => {
                    let e =
                        acp::Error::internal_error().data(format!("unexpected answer {other:?}"));
                    let _ = done.send(Done::Reply(id, Err(e)));
                    return;
                }
                Err(e) => {
                    let _ = done.send(Done::Reply(id, Err(rpc_error(e))));
                    return;
                }
            };
            if let (false, Some(session)) = (facts.is_empty(), session) {
                let title = format!(
                    "The rewound turns remembered {} fact(s): {}. Forget them too? (archived, recoverable with `reasonix memory restore ID`)",
                    facts.len(),
                    facts.join(", ")
                );
                let call = acp::ToolCallUpdate::new(
                    format!("rewind-forget-{to_turn}"),
                    acp::ToolCallUpdateFields::new().title(title),
                );
                let options = vec![
                    acp::PermissionOption::new(
                        FORGET,
                        "Forget them",
                        acp::PermissionOptionKind::AllowOnce,
                    ),
                    acp::PermissionOption::new(
                        KEEP,
                        "Keep them",
                        acp::PermissionOptionKind::RejectOnce,
                    ),
                ];
                let request = acp::RequestPermissionRequest::new(session, call, options);
                let answer = peer.request("session/request_permission", &request).await;
                let forget = matches!(
                    answer.ok().and_then(|v| serde_json::from_value::<acp::RequestPermissionResponse>(v).ok()),
                    Some(r) if matches!(&r.outcome, acp::RequestPermissionOutcome::Selected(s) if s.option_id.0.as_ref() == FORGET)
                );
                if forget {
                    use crate::memory::access::Access;
                    let stores = crate::memory::command::Stores {
                        project: Access::Remote(client.clone()),
                        global: Access::Local(crate::memory::global_store(&home)),
                    };
                    let (out, _error) = stores.forget(&facts).await;
                    text.push_str(&format!("\n{out}"));
                } else {
                    text.push_str(&format!(
                        "\nThe facts the rewound turns remembered are kept: {}",
                        facts.join(", ")
                    ));
                }
            }
            let _ = done.send(Done::Reply(id, Ok(text)));
        });
    }
}
