//! File copy, host side (issue #36 §3): serve a copy channel the laptop opens
//! (`reasonix cp`, `/upload`, `/download`).
//!
//! The laptop's policy in the open is tightened by the workspace's project file exactly as a
//! session's is ([`crate::project::enforce`]); then every path goes through the same rules
//! as the file tools:
//! - an upload writes only where `write_file` may: inside the workspace or an `allow_write`
//!   root after resolving symlinks and `..` ([`crate::tools::confine_write`]), never into a
//!   `.git` directory, never a path a deny rule on the file writers covers; the check runs at
//!   the open (so a refused upload sends nothing), for every entry of a tree, and again
//!   right before each file is renamed into place;
//! - a download reads only what `read_file` may: nothing in a `forbid_read` location or
//!   covered by a deny rule on the readers; symlinks inside a tree are neither followed nor
//!   copied.
//!
//! The bytes themselves are [`reasonix_forward::copy`]'s, shared with the laptop.

use std::path::{Path, PathBuf};

use reasonix_forward::channel::{ChannelAccepted, Offer};
use reasonix_forward::copy::{self, CopyAccepted, CopyDir, CopyOpen, Place, COPY_WINDOW};
use reasonix_forward::proto::{ErrorCode, RpcError};
use serde_json::json;

use crate::policy::{Decision, Policy};
use crate::tools::{confine_write, ToolContext};

/// The host's rules for one copy.
pub struct HostRules {
    ctx: ToolContext,
    rules: Policy,
}

impl HostRules {
    /// The laptop's `open.policy` tightened by the project file of `workspace`.
    pub fn new(open: &CopyOpen, workspace: &Path, base: &ToolContext) -> Result<Self, String> {
        let enforced = crate::project::enforce(&open.policy, workspace, base)
            .map_err(|e| format!("the workspace's policy could not be read: {e}"))?;
        Ok(HostRules {
            ctx: enforced.tool_ctx,
            rules: enforced.rules,
        })
    }

    /// The absolute host path of `raw` (relative to the workspace).
    pub fn resolve_raw(&self, raw: &str) -> PathBuf {
        if raw.is_empty() || raw == "." {
            return self.ctx.workspace.clone();
        }
        self.ctx.resolve(raw)
    }

    /// Why `path` may not be written, or its checked (symlink-resolved) form.
    pub fn check_write(&self, raw: &str) -> Result<PathBuf, String> {
        let raw = if raw.is_empty() { "." } else { raw };
        let target = confine_write(&self.ctx, raw)
            .map_err(|e| format!("{e} (uploads follow the same confinement as the file tools)"))?;
        let path = target.path().to_path_buf();
        let deny = self.rules.write_deny_rules();
        if let Some(i) = deny.covering(&path) {
            return Err(format!(
                "refusing to write {raw}: denied by rule `{}` (uploads follow the same deny rules as the file tools)",
                deny.text(i)
            ));
        }
        for tool in crate::tools::WRITER_TOOLS {
            if let Decision::Deny { reason } =
                self.rules
                    .decide(tool, &json!({ "path": path.display().to_string() }), false)
            {
                return Err(format!("refusing to write {raw}: {reason}"));
            }
        }
        Ok(path)
    }

    /// Why `path` may not be read (a download), if it may not.
    pub fn check_read(&self, path: &Path) -> Result<(), String> {
        if self.ctx.is_forbidden_read(path) {
            return Err(format!(
                "refusing to read {}: it is in a forbid_read location ([sandbox] forbid_read)",
                path.display()
            ));
        }
        if let Decision::Deny { reason } = self.rules.decide(
            "read_file",
            &json!({ "path": path.display().to_string() }),
            true,
        ) {
            return Err(format!("refusing to read {}: {reason}", path.display()));
        }
        Ok(())
    }
}

impl Place for HostRules {
    fn resolve(&self, dest: &str) -> Result<PathBuf, String> {
        self.check_write(dest)
    }

    fn check(&self, path: &Path) -> Result<PathBuf, String> {
        self.check_write(&path.display().to_string())
    }
}

fn refusal(msg: String) -> RpcError {
    RpcError::new(ErrorCode::Denied, msg)
}

/// Serve a copy channel: check the host path, accept (or refuse with the reason), then
/// receive (upload) or send (download).
pub async fn serve(open: CopyOpen, offer: Offer, workspace: PathBuf, base: ToolContext) {
    let rules = match HostRules::new(&open, &workspace, &base) {
        Ok(r) => r,
        Err(e) => {
            offer.refuse(RpcError::new(ErrorCode::BadConfig, e)).await;
            return;
        }
    };
    let checked = match open.dir {
        CopyDir::Upload => rules.check_write(&open.path),
        CopyDir::Download => {
            let p = rules.resolve_raw(&open.path);
            if std::fs::symlink_metadata(&p).is_err() {
                Err(format!("{} does not exist on the host", p.display()))
            } else {
                rules.check_read(&p).map(|()| p)
            }
        }
    };
    let path = match checked {
        Ok(p) => p,
        Err(e) => {
            offer.refuse(refusal(e)).await;
            return;
        }
    };
    let accepted = ChannelAccepted::Copy(CopyAccepted {
        path: path.display().to_string(),
    });
    let chan = match offer.accept(accepted, COPY_WINDOW).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("copy channel not accepted: {e}");
            return;
        }
    };
    let quiet = |_| {};
    let result = match open.dir {
        CopyDir::Upload => copy::receive(chan, &open.path, &rules, &quiet).await,
        CopyDir::Download => {
            let check = |p: &Path| rules.check_read(p);
            copy::send(chan, &path, open.recursive, &check, &quiet).await
        }
    };
    match result {
        Ok(s) => tracing::info!(
            "copy {:?} {} done: {} files, {} bytes sent",
            open.dir,
            path.display(),
            s.files,
            s.progress.sent
        ),
        Err(e) => tracing::info!("copy {:?} {} stopped: {e}", open.dir, path.display()),
    }
}
