//! `reasonix run "/compact [focus]"`: compact a session headless instead of running a turn.
//! The session must exist (`--continue` or `--session`); this client drives it while the
//! model writes the summary through its gateway, prints the `compacted` events and exits.

use super::*;

/// The focus text when `prompt` is the `/compact` command (`Some("")` without one).
pub fn compact_command(prompt: &str) -> Option<&str> {
    let rest = prompt.trim().strip_prefix("/compact")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// Compact the session `opts` names with `focus` steering the summary.
pub async fn compact(
    config: &Config,
    connector: Arc<dyn Connector>,
    opts: &RunOptions,
    focus: &str,
) -> RunOutcome {
    let mut out = Printer {
        json: opts.json,
        ..Printer::default()
    };
    if opts.session.is_none() && !opts.continue_last {
        return fail_with(
            &mut out,
            Exit::Usage,
            "/compact needs an existing session: add --continue (the most recent) or --session ID"
                .into(),
        );
    }
    let gateway = Arc::new(Gateway::new(config));
    let (client_opts, laptop_mcp) = crate::client::options_for(config);
    let (client, mut events) = Client::start(connector, gateway, client_opts);
    let model = opts.model.clone().or(config.default_model.clone());
    let open = OpenSession {
        // Filled in by the client (user hooks and trust records).
        hooks: Default::default(),
        session: opts.session.clone(),
        new: false,
        // The daemon sends live events only past `since`, and the last seq is not known
        // before the open: catch up and skip what the answer says was there already.
        since: 0,
        read_only: false,
        takeover: false,
        settings: SessionSettings {
            model: model.clone(),
            headless: true,
            max_steps: Some(config.agent.max_steps),
            policy: config.session_policy(),
            laptop_mcp,
            context: config.context_settings(opts.model.as_deref()),
            effort: config.session_effort(opts.model.as_deref()),
            memory: crate::memory::session_settings(&config.home, false),
            planner_model: config.agent.planner_model.clone(),
            skills: crate::skills::session_settings(config),
            delegation: config.delegation_settings(),
        },
        keeper: false,
    };
    let opened = match client.open_session(open).await {
        Ok(o) => o,
        Err(e) => return fail(&mut out, e.to_string()),
    };
    if let Some(n) = &opened.notice {
        out.notice(n);
    }
    out.session(&opened.session, &opened.sandbox);
    let seen = opened.last_seq;
    let mut latest = seen;
    let mut tally = Tally {
        prices: config
            .resolve_model(opts.model.as_deref())
            .ok()
            .and_then(|m| m.prices),
        ..Tally::default()
    };
    let mut usage = Usage::default();
    let request = Request::Compact {
        request_id: format!("compact-{:016x}", rand::random::<u64>()),
        focus: (!focus.is_empty()).then(|| focus.to_string()),
    };
    let c = client.clone();
    let answer = tokio::spawn(async move { c.request(request).await });
    tokio::pin!(answer);
    loop {
        tokio::select! {
            r = &mut answer => {
                let r = match r {
                    Ok(r) => r,
                    Err(e) => return fail(&mut out, format!("the compact task failed: {e}")),
                };
                if let Ok(Response::CompactDone { last_seq, .. }) = &r {
                    // The events travel apart from the answer: print them up to `last_seq`
                    // first (bounded, in case the link drops meanwhile).
                    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
                    while latest < *last_seq {
                        match tokio::time::timeout_at(until, events.recv()).await {
                            Ok(Some(ev)) => {
                                if let ClientEvent::Event(e) = &ev {
                                    latest = latest.max(e.seq);
                                }
                                print_event(&mut out, ev, seen, &mut usage, &mut tally);
                            }
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
                client.leave().await;
                return match r {
                    Ok(Response::CompactDone { summary, .. }) => {
                        if out.json {
                            out.line(json!({"type": "compact_finished", "summary": summary,
                                "usage": {"prompt_tokens": usage.prompt_tokens,
                                          "completion_tokens": usage.completion_tokens,
                                          "cache_hit_tokens": usage.cache_hit_tokens,
                                          "cache_miss_tokens": usage.cache_miss_tokens},
                                "requests": tally.requests, "compactions": tally.compactions,
                                "cost_usd": tally.cost}));
                        } else {
                            println!("session {}: {summary}", opened.session);
                        }
                        RunOutcome { exit: Exit::Completed, reason: None }
                    }
                    Ok(other) => fail(&mut out, format!("unexpected answer {other:?}")),
                    Err(e) => fail(&mut out, e.to_string()),
                };
            }
            ev = events.recv() => match ev {
                Some(ClientEvent::Connection(ConnState::Failed { reason, .. })) => {
                    return fail_with(&mut out, Exit::Connection, reason)
                }
                Some(ev) => {
                    if let ClientEvent::Event(e) = &ev {
                        latest = latest.max(e.seq);
                    }
                    print_event(&mut out, ev, seen, &mut usage, &mut tally)
                }
                None => return fail(&mut out, "the client stopped unexpectedly".into()),
            },
        }
    }
}

/// Print what the compaction does; events up to `seen` are the catch-up (already there).
fn print_event(
    out: &mut Printer,
    ev: ClientEvent,
    seen: u64,
    usage: &mut Usage,
    tally: &mut Tally,
) {
    match ev {
        ClientEvent::Connection(state) => out.connection(&state),
        ClientEvent::AgentSign(ask) => {
            out.notice(&format!(
                "refused: {}; a headless run cannot ask (list the key in [sandbox] ssh_agent_approved to allow it)",
                ask.question()
            ));
            ask.answer.answer(false);
        }
        ClientEvent::Event(e) if e.seq > 0 && e.seq <= seen => {}
        ClientEvent::Event(e) => match &e.kind {
            EventKind::Usage { usage: u, .. } => {
                usage.prompt_tokens += u.prompt_tokens;
                usage.completion_tokens += u.completion_tokens;
                usage.cache_hit_tokens += u.cache_hit_tokens;
                usage.cache_miss_tokens += u.cache_miss_tokens;
                tally.requests += 1;
                if let Some(p) = &tally.prices {
                    tally.cost = Some(tally.cost.unwrap_or(0.0) + crate::context::cost_of(u, p));
                }
            }
            EventKind::Compacted { .. } => {
                tally.compactions += 1;
                out.event(&e.kind);
            }
            EventKind::Notice { text } => out.notice(text),
            _ => {}
        },
        ClientEvent::Reattached { reason } => out.notice(&reason),
        ClientEvent::State { .. } | ClientEvent::Role { .. } | ClientEvent::ToolProgress { .. } => {
        }
    }
}

#[cfg(test)]
mod tests {
    use super::compact_command;

    #[test]
    fn the_compact_command_and_its_focus() {
        assert_eq!(compact_command("/compact"), Some(""));
        assert_eq!(
            compact_command("  /compact  the API design "),
            Some("the API design")
        );
        assert_eq!(compact_command("/compaction please"), None);
        assert_eq!(compact_command("please /compact"), None);
    }
}
