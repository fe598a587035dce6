//! What the configuration gives the TUI: the app's settings (models, prices, permission
//! mode) and the settings a session is opened with.

use std::collections::HashMap;

use reasonix_forward::proto::SessionSettings;

use crate::config::Config;
use crate::tui::app::AppSettings;

/// UI settings derived from the configuration: model list, prices, permission mode.
pub fn app_settings(config: &Config, workspace: String, model: Option<String>) -> AppSettings {
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
        workspace,
        models,
        model: model.or_else(|| config.default_model.clone()),
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

pub(super) fn session_settings(config: &Config, model: Option<String>) -> SessionSettings {
    SessionSettings {
        context: config.context_settings(model.as_deref()),
        model: model.or_else(|| config.default_model.clone()),
        headless: false,
        max_steps: Some(config.agent.max_steps),
        policy: config.session_policy(),
        laptop_mcp: crate::client::options_for(config).1,
    }
}
