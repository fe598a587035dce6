//! `web_fetch` under the permission policy: `WebFetch(domain:…)` rules name the URL's host,
//! deny > ask > allow, and with no rule it asks in ask and auto mode (only yolo runs it).

#![allow(clippy::unwrap_used)] // tests may unwrap

use reasonix_remote::policy::{Decision, Mode, Policy};
use serde_json::json;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn decide(p: &Policy, url: &str) -> Decision {
    p.decide("web_fetch", &json!({"url": url}), false)
}

#[test]
fn domain_rules_deny_ask_allow() {
    let p = Policy::new(
        Mode::Ask,
        &s(&["WebFetch(domain:docs.rs)", "WebFetch(domain:*.python.org)"]),
        &s(&["WebFetch(domain:pypi.docs.python.org)"]),
        &s(&["WebFetch(domain:evil.example)"]),
    )
    .unwrap();
    assert_eq!(decide(&p, "https://docs.rs/tokio/latest"), Decision::Allow);
    assert_eq!(decide(&p, "https://DOCS.RS:443/x"), Decision::Allow);
    assert_eq!(decide(&p, "https://docs.python.org/3/"), Decision::Allow);
    assert!(matches!(
        decide(&p, "https://python.org/"),
        Decision::Ask { .. }
    ));
    assert!(matches!(
        decide(&p, "https://pypi.docs.python.org/"),
        Decision::Ask { .. }
    ));
    assert!(matches!(
        decide(&p, "http://evil.example/?q=secret"),
        Decision::Deny { .. }
    ));
    // The userinfo trick names evil.example as the host, not docs.rs.
    assert!(matches!(
        decide(&p, "http://docs.rs@evil.example/"),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        decide(&p, "https://docs.rs.evil.example/"),
        Decision::Ask { .. }
    ));
    // Not a URL: asked, never allowed by a domain rule.
    assert!(matches!(
        decide(&p, "file:///etc/passwd"),
        Decision::Ask { .. }
    ));
}

#[test]
fn no_rule_asks_in_ask_and_auto_and_deny_holds_in_yolo() {
    for mode in [Mode::Ask, Mode::Auto] {
        let p = Policy::new(mode, &[], &[], &[]).unwrap();
        match decide(&p, "https://example.com/") {
            Decision::Ask { reason } => {
                assert!(reason.contains("no rule allows example.com"), "{reason}")
            }
            d => panic!("{mode:?}: {d:?}"),
        }
    }
    let p = Policy::new(Mode::Yolo, &[], &[], &s(&["WebFetch"])).unwrap();
    assert!(matches!(
        decide(&p, "https://example.com/"),
        Decision::Deny { .. }
    ));
    let p = Policy::new(Mode::Yolo, &[], &[], &[]).unwrap();
    assert_eq!(decide(&p, "https://example.com/"), Decision::Allow);
    // `WebFetch` alone allows every host.
    let p = Policy::new(Mode::Ask, &s(&["WebFetch"]), &[], &[]).unwrap();
    assert_eq!(decide(&p, "https://example.com/"), Decision::Allow);
}

#[test]
fn bad_rules_and_always_answers() {
    let e = Policy::new(Mode::Ask, &s(&["WebFetch(docs.rs)"]), &[], &[]).unwrap_err();
    assert!(e.to_string().contains("WebFetch(domain:docs.rs)"), "{e}");
    assert!(Policy::new(Mode::Ask, &s(&["WebFetch(domain:a b)"]), &[], &[]).is_err());
    // "Always allow" remembers the host, not every fetch.
    assert_eq!(
        Policy::always_rule("web_fetch", &json!({"url": "https://Docs.rs/x"})).as_deref(),
        Some("WebFetch(domain:docs.rs)")
    );
    let mut p = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
    p.allow_for_session("web_fetch", &json!({"url": "https://docs.rs/x"}));
    assert_eq!(decide(&p, "https://docs.rs/y"), Decision::Allow);
    assert!(matches!(
        decide(&p, "https://crates.io/"),
        Decision::Ask { .. }
    ));
}
