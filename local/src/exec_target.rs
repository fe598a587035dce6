//! Where the exec transport runs: `reasonix exec 'COMMAND' :/path`, and the shorthands
//! `docker CTR:/path`, `podman CTR:/path`, `kube [-n NS] [-c CONTAINER] POD:/path`. Each
//! becomes an argv prefix that reaches a shell on the host when `sh -s` / `sh -c LINE` is
//! appended (see `reasonix_bootstrap::ExecConnection`).

/// A workspace reached by running a local command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecTarget {
    /// The command words before `sh …` (e.g. `podman exec -i web`).
    pub argv: Vec<String>,
    /// The workspace path on the host (inside the container or pod).
    pub workspace: String,
    /// Short name for messages: `podman:web`, `kube:ns/pod`, `exec`.
    pub name: String,
}

impl ExecTarget {
    /// The place without the workspace, for messages.
    pub fn label(&self) -> String {
        self.name.clone()
    }

    /// `reasonix exec 'COMMAND' :/path` (or `--exec 'COMMAND' --workspace /path`).
    pub fn from_command(command: &str, workspace: &str) -> Result<Self, String> {
        let argv = reasonix_bootstrap::split_command(command)?;
        let workspace = workspace.strip_prefix(':').unwrap_or(workspace);
        Ok(Self {
            name: format!("exec:{}", argv[0]),
            argv,
            workspace: check_workspace(workspace)?,
        })
    }

    /// `docker CTR:/path` or `podman CTR:/path` (`engine` is the program to run).
    pub fn container(engine: &str, spec: &str) -> Result<Self, String> {
        let (ctr, path) = split_spec(spec, "CONTAINER:/path")?;
        Ok(Self {
            argv: vec![engine.into(), "exec".into(), "-i".into(), ctr.clone()],
            workspace: path,
            name: format!("{engine}:{ctr}"),
        })
    }

    /// `kube [-n NS] [-c CONTAINER] POD:/path`: `kubectl exec -i [-n NS] POD [-c C] --`.
    pub fn kube(
        namespace: Option<&str>,
        container: Option<&str>,
        spec: &str,
    ) -> Result<Self, String> {
        let (pod, path) = split_spec(spec, "POD:/path")?;
        let mut argv: Vec<String> = vec!["kubectl".into(), "exec".into(), "-i".into()];
        if let Some(ns) = namespace {
            argv.extend(["-n".into(), ns.to_string()]);
        }
        argv.push(pod.clone());
        if let Some(c) = container {
            argv.extend(["-c".into(), c.to_string()]);
        }
        argv.push("--".into());
        let name = match namespace {
            Some(ns) => format!("kube:{ns}/{pod}"),
            None => format!("kube:{pod}"),
        };
        Ok(Self {
            argv,
            workspace: path,
            name,
        })
    }
}

/// `NAME:/path` → (`NAME`, `/path`); the path defaults to `.` (the home) when absent.
fn split_spec(spec: &str, shape: &str) -> Result<(String, String), String> {
    let (name, path) = match spec.split_once(':') {
        Some((n, p)) => (n, p),
        None => (spec, "."),
    };
    if name.is_empty() || name.starts_with('-') || name.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{spec}` is not {shape}: the name is empty, starts with `-` or has spaces"
        ));
    }
    Ok((name.to_string(), check_workspace(path)?))
}

fn check_workspace(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Ok(".".into());
    }
    if path.contains('\n') || path.contains('\0') {
        return Err(format!("workspace path {path:?} has a newline or NUL"));
    }
    Ok(path.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn shorthands_build_the_engine_argv() {
        let t = ExecTarget::container("podman", "web:/work/repo").unwrap();
        assert_eq!(t.argv, ["podman", "exec", "-i", "web"]);
        assert_eq!(t.workspace, "/work/repo");
        assert_eq!(t.label(), "podman:web");
        let t = ExecTarget::container("docker", "web").unwrap();
        assert_eq!(t.workspace, ".");
        let t = ExecTarget::kube(Some("dev"), Some("main"), "ws-7:/src").unwrap();
        assert_eq!(
            t.argv,
            ["kubectl", "exec", "-i", "-n", "dev", "ws-7", "-c", "main", "--"]
        );
        assert_eq!(t.label(), "kube:dev/ws-7");
        let t = ExecTarget::kube(None, None, "p:/w").unwrap();
        assert_eq!(t.argv, ["kubectl", "exec", "-i", "p", "--"]);
        let t = ExecTarget::from_command("ssh -T box docker exec -i 'my ctr'", ":/w").unwrap();
        assert_eq!(t.argv.last().unwrap(), "my ctr");
        assert_eq!(t.workspace, "/w");
        assert!(ExecTarget::container("podman", "-rm:/x").is_err());
        assert!(ExecTarget::container("podman", ":/x").is_err());
        assert!(ExecTarget::from_command("", "/w").is_err());
    }
}
