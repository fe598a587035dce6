//! `_reasonix/cancel_subagent` (#33 §2): an editor cancels one running child, named by the
//! ACP tool call the child is shown as (`<parent call>/sa-N`, a grandchild
//! `<parent call>/sa-N/sa-M`). The host cancels that child alone
//! (`Request::CancelSubagent`); the parent's call gets it as cancelled and its turn goes on.

use super::*;

impl SessionHandle {
    /// Cancel the child shown as tool call `tool_call_id`. `Err`: not a child's tool call,
    /// or the host knows no such running child (its message names the known ones).
    pub async fn cancel_subagent(&self, tool_call_id: &str) -> Result<(), acp::Error> {
        let child = child_of(tool_call_id).ok_or_else(|| {
            acp::Error::invalid_params().data(format!(
                "`{tool_call_id}` is not a subagent's tool call (those are `<parent call>/sa-N`)"
            ))
        })?;
        let request_id = format!("acp-cancel-child-{:016x}", rand::random::<u64>());
        match self
            .client
            .request(Request::CancelSubagent { request_id, child })
            .await
        {
            Ok(_) => Ok(()),
            Err(CallError::Remote(e)) if e.code == ErrorCode::NotFound => {
                Err(acp::Error::invalid_params().data(e.message))
            }
            Err(e) => Err(rpc_error(e)),
        }
    }
}

/// The child id of a child's ACP tool call id (its last `/sa-N`).
fn child_of(tool_call_id: &str) -> Option<String> {
    let (_, child) = tool_call_id.rsplit_once('/')?;
    let n = child.strip_prefix("sa-")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| child.to_string())
}

#[cfg(test)]
mod tests {
    use super::child_of;

    #[test]
    fn a_childs_tool_call_names_the_child() {
        assert_eq!(child_of("call_t/sa-1").as_deref(), Some("sa-1"));
        assert_eq!(child_of("call_t/sa-1/sa-12").as_deref(), Some("sa-12"));
        assert_eq!(child_of("call_t"), None);
        assert_eq!(child_of("call_t/sa-"), None);
        assert_eq!(child_of("call_t/x-1"), None);
        assert_eq!(child_of("sa-1/sa-2x"), None);
    }
}
