//! The built-in skills, embedded in the binary: `/init`, `/review`, `/explore`. Their text is
//! fixed at build time (byte-stable: the same binary always sends the same bytes).

use reasonix_forward::skills::SkillFile;

/// `(name, SKILL.md text)` of every built-in skill.
pub const BUILTIN: &[(&str, &str)] = &[
    ("explore", include_str!("builtin/explore.md")),
    ("init", include_str!("builtin/init.md")),
    ("review", include_str!("builtin/review.md")),
];

/// The built-in skills as files (named `built-in:<name>` in notices and listings).
pub fn files() -> Vec<SkillFile> {
    BUILTIN
        .iter()
        .map(|(name, text)| SkillFile {
            name: (*name).to_string(),
            path: format!("built-in:{name}"),
            text: (*text).to_string(),
            assets: Vec::new(),
        })
        .collect()
}
