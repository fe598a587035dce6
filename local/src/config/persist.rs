//! Saving an "always allow" rule into the user's config file.

use std::path::Path;

use super::ConfigError;

/// Add `rule` to `[permissions] allow` of `$home/config.toml` (created if missing), keeping
/// the file's comments and layout. Does nothing when the rule is already there.
pub fn persist_allow_rule(home: &Path, rule: &str) -> Result<bool, ConfigError> {
    let path = home.join("config.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(invalid_rule(
                &path,
                format!(
                    "cannot read {} to save the rule {rule}: {e}",
                    path.display()
                ),
            ))
        }
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        invalid_rule(
            &path,
            format!(
                "cannot save the rule {rule}: {} does not parse: {e}",
                path.display()
            ),
        )
    })?;
    let perms = doc
        .entry("permissions")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
    let Some(perms) = perms.as_table_like_mut() else {
        return Err(invalid_rule(
            &path,
            format!("{}: `permissions` is not a table", path.display()),
        ));
    };
    let allow = perms
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Value::Array(
            toml_edit::Array::new(),
        )));
    let Some(arr) = allow.as_array_mut() else {
        return Err(invalid_rule(
            &path,
            format!("{}: `permissions.allow` is not an array", path.display()),
        ));
    };
    if arr.iter().any(|v| v.as_str() == Some(rule)) {
        return Ok(false);
    }
    arr.push(rule);
    std::fs::create_dir_all(home)
        .map_err(|e| invalid_rule(&path, format!("{}: {e}", home.display())))?;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, doc.to_string())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| invalid_rule(&path, format!("cannot write {}: {e}", path.display())))?;
    Ok(true)
}

fn invalid_rule(path: &Path, message: String) -> ConfigError {
    ConfigError::Invalid {
        source_name: Some(path.display().to_string()),
        key: "permissions.allow".into(),
        message,
    }
}
