//! Why bubblewrap cannot run, in words a user can act on: which host check failed (missing
//! binary, user namespaces off, AppArmor's unprivileged-userns restriction, a seccomp filter
//! or container runtime) and what to change.

/// Reads a host setting under `/proc/sys` (e.g. `kernel/apparmor_restrict_unprivileged_userns`),
/// trimmed; `None` when the file does not exist.
pub fn read_host_setting(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// `raw` (the probe's own failure text) followed by the host check that explains it, using
/// `setting` to read `/proc/sys` values (injectable for tests).
pub fn explain_bwrap_failure(raw: &str, setting: &dyn Fn(&str) -> Option<String>) -> String {
    let lower = raw.to_ascii_lowercase();
    let on = |name: &str, v: &str| setting(name).as_deref() == Some(v);
    let reason = if lower.contains("not found") || lower.contains("cannot start") {
        "missing binary: bubblewrap is not installed (install the `bubblewrap` package)".to_string()
    } else if lower.contains("no space left on device") || lower.contains("enospc") {
        // ENOSPC from clone(CLONE_NEWUSER): the user-namespace limit is 0 or used up, which is
        // also what a sandbox or container that forbids nested namespaces reports.
        format!(
            "no user namespaces: creating one failed with ENOSPC (user.max_user_namespaces = {}; \
             inside a container or sandbox that forbids nested namespaces this is expected)",
            setting("user/max_user_namespaces").unwrap_or_else(|| "unknown".into())
        )
    } else if on("kernel/apparmor_restrict_unprivileged_userns", "1") {
        "AppArmor restriction: kernel.apparmor_restrict_unprivileged_userns = 1 denies user \
         namespaces to unconfined programs (add an AppArmor profile for bwrap, or set the sysctl to 0)"
            .to_string()
    } else if on("kernel/unprivileged_userns_clone", "0") {
        "no user namespaces: kernel.unprivileged_userns_clone = 0 (set it to 1)".to_string()
    } else if on("user/max_user_namespaces", "0") {
        "no user namespaces: user.max_user_namespaces = 0 (raise it)".to_string()
    } else if lower.contains("operation not permitted") || lower.contains("permission denied") {
        "seccomp or the container runtime forbids namespaces (EPERM while the kernel settings \
         allow them; e.g. Docker's default seccomp profile)"
            .to_string()
    } else {
        "the probe failed for a reason not recognised".to_string()
    };
    format!("{reason}; {raw}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn each_host_check_is_named() {
        let none = settings(&[]);
        let t = explain_bwrap_failure("bwrap not found in PATH", &none);
        assert!(t.starts_with("missing binary"), "{t}");
        assert!(t.ends_with("bwrap not found in PATH"), "{t}");
        let t = explain_bwrap_failure(
            "probe failed: bwrap: No space left on device",
            &settings(&[("user/max_user_namespaces", "15000")]),
        );
        assert!(t.starts_with("no user namespaces: creating one failed with ENOSPC (user.max_user_namespaces = 15000"), "{t}");
        let perm = "probe failed: bwrap: setting up uid map: Permission denied";
        let t = explain_bwrap_failure(
            perm,
            &settings(&[("kernel/apparmor_restrict_unprivileged_userns", "1")]),
        );
        assert!(t.starts_with("AppArmor restriction"), "{t}");
        let t = explain_bwrap_failure(
            perm,
            &settings(&[("kernel/unprivileged_userns_clone", "0")]),
        );
        assert!(t.contains("unprivileged_userns_clone = 0"), "{t}");
        let t = explain_bwrap_failure(
            "bwrap: Creating new namespace failed: Operation not permitted",
            &settings(&[("kernel/apparmor_restrict_unprivileged_userns", "0")]),
        );
        assert!(t.starts_with("seccomp"), "{t}");
        let t = explain_bwrap_failure("exit status: 1", &none);
        assert!(
            t.starts_with("the probe failed for a reason not recognised"),
            "{t}"
        );
    }
}
