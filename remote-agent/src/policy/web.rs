//! The decision for `web_fetch`: rules name the URL's host (`WebFetch(domain:docs.rs)`),
//! deny > ask > allow; with no rule it asks in `ask` and `auto` mode alike (a URL can carry
//! data out, so it is not treated like a workspace writer), and only `yolo` lets it run.

use serde_json::Value;

use super::{Decision, Mode, Policy};
use reasonix_forward::web::{url_host, WEB_FETCH_TOOL};

impl Policy {
    pub(super) fn decide_web_fetch(&self, args: &Value) -> Decision {
        let url = args.get("url").and_then(Value::as_str).unwrap_or("");
        let host = url_host(url);
        let covers = |r: &super::rules::Rule| {
            r.names_tool(WEB_FETCH_TOOL)
                && (r.spec.is_none() || host.as_deref().is_some_and(|h| r.matches_host(h)))
        };
        if let Some(r) = self.deny.iter().find(|r| covers(r)) {
            return Decision::Deny {
                reason: format!("denied by rule `{}`", r.text),
            };
        }
        if let Some(r) = self.ask.iter().find(|r| covers(r)) {
            return Decision::Ask {
                reason: format!("rule `{}` asks before web_fetch runs", r.text),
            };
        }
        if host.is_some() && self.allow.iter().chain(self.session.iter()).any(covers) {
            return Decision::Allow;
        }
        match self.mode {
            Mode::Yolo => Decision::Allow,
            Mode::Ask | Mode::Auto => Decision::Ask {
                reason: match host {
                    Some(h) => format!(
                        "web_fetch wants to fetch {url} through the laptop (no rule allows {h}; a URL can carry data out)"
                    ),
                    None => format!("web_fetch wants to fetch {url}, which is not an http(s) URL"),
                },
            },
        }
    }
}
