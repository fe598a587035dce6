//! What the configuration gives the TUI: the app's settings (models, prices, permission
//! mode) and the settings a session is opened with.

use std::collections::HashMap;

use reasonix_forward::proto::{ReasoningEffort, SessionSettings};

use crate::config::Config;
use crate::tui::app::{AppSettings, ModelEfforts};

/// UI settings derived from the configuration: model list, prices, permission mode.
pub fn app_settings(config: &Config, workspace: String, model: Option<String>) -> AppSettings {
    let model = model.or_else(|| config.default_model.clone());
    let mut models = Vec::new();
    let mut prices = HashMap::new();
    let mut context_windows = HashMap::new();
    for p in &config.providers {
        for m in &p.models {
            let label = format!("{}/{m}", p.name);
            if let Ok(r) = config.resolve_model(Some(&label)) {
                context_windows.insert(label.clone(), r.context_window);
                context_windows.entry(m.clone()).or_insert(r.context_window);
                if let Some(pr) = r.prices {
                    prices.insert(label.clone(), pr);
                    // Usage events carry the bare model name the provider reported.
                    prices.entry(m.clone()).or_insert(pr);
                }
            }
            models.push(label);
        }
    }
    AppSettings {
        efforts: model_efforts(config),
        effort: config.agent.effort,
        workspace,
        models,
        model,
        prices,
        mode: config.permissions.mode.as_str().to_string(),
        build: reasonix_forward::build_id().to_string(),
        config_file: config
            .home
            .join(crate::config::USER_FILE)
            .display()
            .to_string(),
        workspace_key: config.workspace_key.clone(),
        context_windows,
        prompt_confirm_ratio: config.agent.prompt_confirm_ratio,
    }
}

pub(super) fn session_settings(
    config: &Config,
    model: Option<String>,
    effort: Option<ReasoningEffort>,
) -> SessionSettings {
    SessionSettings {
        context: config.context_settings(model.as_deref()),
        model: model.or_else(|| config.default_model.clone()),
        headless: false,
        max_steps: Some(config.agent.max_steps),
        policy: config.session_policy(),
        laptop_mcp: crate::client::options_for(config).1,
        effort,
        memory: crate::memory::session_settings(&config.home, false),
        planner_model: config.agent.planner_model.clone(),
        skills: crate::skills::session_settings(config),
        delegation: config.delegation_settings(),
    }
}

/// The effort levels of every model the config names, under each label `/model` accepts
/// for it (`provider/model`, the bare model name, the provider name for its default), and
/// under `""` those of the default model.
fn model_efforts(config: &Config) -> HashMap<String, ModelEfforts> {
    let mut out = HashMap::new();
    let entry = |r: crate::config::ResolvedModel| ModelEfforts {
        supported: r.efforts,
        default: r.default_effort,
    };
    for p in &config.providers {
        for m in &p.models {
            if let Ok(r) = config.resolve_model(Some(&format!("{}/{m}", p.name))) {
                out.entry(m.clone()).or_insert_with(|| entry(r.clone()));
                out.insert(format!("{}/{m}", p.name), entry(r));
            }
        }
        if let Ok(r) = config.resolve_model(Some(&p.name)) {
            out.insert(p.name.clone(), entry(r));
        }
    }
    if let Ok(r) = config.resolve_model(None) {
        out.insert(String::new(), entry(r));
    }
    out
}
