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
        session: opts.session.clone(),
        new: false,
        // No catch-up: only what the compaction does is printed.
        since: u64::MAX,
        read_only: false,
        takeover: false,
        settings: SessionSettings {
            model: model.clone(),
            headless: true,
            max_steps: Some(config.agent.max_steps),
            policy: config.session_policy(),
            laptop_mcp,
            context: config.context_settings(opts.model.as_deref()),
        },
    };
    let opened = match client.open_session(open).await {
        Ok(o) => o,
        Err(e) => return fail(&mut out, e.to_string()),
    };
    if let Some(n) = &opened.notice {
        out.notice(n);
    }
    out.session(&opened.session, &opened.sandbox);
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
                // Events journaled before the answer may still be queued: print them first.
                while let Ok(ev) = events.try_recv() {
                    print_event(&mut out, ev, &mut usage, &mut tally);
                }
                let r = match r {
                    Ok(r) => r,
                    Err(e) => return fail(&mut out, format!("the compact task failed: {e}")),
                };
                return match r {
                    Ok(Response::CompactDone { summary }) => {
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
                Some(ClientEvent::Connection(ConnState::Failed { reason })) => {
                    return fail_with(&mut out, Exit::Connection, reason)
                }
                Some(ev) => print_event(&mut out, ev, &mut usage, &mut tally),
                None => return fail(&mut out, "the client stopped unexpectedly".into()),
            },
        }
    }
}

fn print_event(out: &mut Printer, ev: ClientEvent, usage: &mut Usage, tally: &mut Tally) {
    match ev {
        ClientEvent::Connection(state) => out.connection(&state),
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
        ClientEvent::State { .. }
        | ClientEvent::Role { .. }
        | ClientEvent::ToolProgress { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::compact_command;

    #[test]
    fn the_compact_command_and_its_focus() {
        assert_eq!(compact_command("/compact"), Some(""));
        assert_eq!(compact_command("  /compact  the API design "), Some("the API design"));
        assert_eq!(compact_command("/compaction please"), None);
        assert_eq!(compact_command("please /compact"), None);
    }
}
