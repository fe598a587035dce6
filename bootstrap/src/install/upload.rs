//! Sending the payload (SFTP on SSH, the exec stream elsewhere) and the finishing script
//! that checks, unpacks and moves it into place.

use super::*;

impl Job<'_> {
    /// Upload `payload` to a temporary name and run the finishing script for `attempt`.
    pub(super) async fn send(
        &self,
        payload: &[u8],
        label: &str,
        attempt: &Attempt,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let tmp = format!(
            "{}/.{REMOTE_BIN_PREFIX}{}.tmp-{:016x}",
            self.bin_dir,
            self.build_id,
            rand::random::<u64>()
        );
        let upload_path = match attempt {
            Attempt::Full(Codec::Raw) => format!("{tmp}.raw"),
            Attempt::Full(c) => format!("{tmp}{}", c.suffix()),
            Attempt::Delta { codec, .. } => format!("{tmp}.delta{}", codec.suffix()),
        };
        if self.conn.as_ssh().is_none() {
            return self
                .send_stream(payload, label, attempt, &tmp, &upload_path)
                .await;
        }
        let opened = self.sftp.lock_or_recover().take();
        let sftp = match opened {
            Some(s) => s?,
            None => sftp_of(self.conn).await?,
        };
        let total = payload.len() as u64;
        let prompter = self.conn.prompter().clone();
        let label = format!(
            "uploading reasonix-remote {} ({}, {label})",
            self.build_id,
            human_size(total)
        );
        prompter.progress(Stage::Upload, &label, Some((0, total)));
        let upload = async {
            let mut src: &[u8] = payload;
            sftp.upload_unclosed(&upload_path, &mut src, 0o600, &|done| {
                prompter.progress(Stage::Upload, &label, Some((done, total)))
            })
            .await
        };
        // Keep the lock fresh while the upload runs (slow links take longer than 60 s).
        let refresh = async {
            loop {
                tokio::time::sleep(LOCK_REFRESH).await;
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("touch {} 2>/dev/null; exit 0", sh_quote(self.lock)),
                    )
                    .await;
            }
        };
        // The finishing attach's channel opens while the upload runs, so its exec request
        // goes out as soon as the upload is done (one round trip less; a failed open is
        // tried again by the attach, which reports it).
        let open_next = async {
            if let (Some(_), Some(ssh)) = (self.attach, self.conn.as_ssh()) {
                ssh.open_session().await.ok()
            } else {
                None
            }
        };
        let (sent, next_channel) = tokio::join!(
            async {
                tokio::select! {
                    r = upload => r,
                    _ = refresh => unreachable_refresh(),
                }
            },
            open_next
        );
        let (sent, uploaded) = match sent {
            Ok(done) => done,
            Err(e) => {
                let _ = sftp.remove(&upload_path).await;
                return Err(BootstrapError::remote(
                    Stage::Upload,
                    &host,
                    format!("SFTP upload to {upload_path} failed: {e}. Is the sftp subsystem enabled on the host (Subsystem sftp in sshd_config)?"),
                ));
            }
        };

        // Decompress (or apply the delta), verify, chmod, move into place, prune and release
        // the lock — one round trip. Every write is acknowledged, so the upload's content is
        // on the host: the script starts while the SFTP close goes out beside it (the
        // script reads and removes the uploaded file; an open handle does not matter to
        // either).
        self.conn
            .prompter()
            .progress(Stage::Verify, "verifying SHA-256 on the host", None);
        let finish = self.finish_script(&tmp, &upload_path, attempt);
        let (closed, finished) = tokio::join!(
            sftp.close_upload(uploaded),
            self.finish(&finish, sent, next_channel)
        );
        if let Err(e) = closed {
            tracing::debug!(host = %host, error = %e, "closing the uploaded file");
        }
        drop(sftp);
        finished
    }

    /// [`Self::send`] over a transport without SFTP (`docker`/`podman`/`kubectl exec`): the
    /// payload goes through one exec stream (`cat > FILE`), then the same finishing script
    /// checks its SHA-256.
    async fn send_stream(
        &self,
        payload: &[u8],
        label: &str,
        attempt: &Attempt,
        tmp: &str,
        upload_path: &str,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let total = payload.len() as u64;
        let prompter = self.conn.prompter().clone();
        let label = format!(
            "uploading reasonix-remote {} ({}, {label}, through the exec stream)",
            self.build_id,
            human_size(total)
        );
        prompter.progress(Stage::Upload, &label, Some((0, total)));
        let report = |done| prompter.progress(Stage::Upload, &label, Some((done, total)));
        let upload =
            crate::transport::exec::upload_through_stream(self.conn, upload_path, payload, &report);
        let refresh = async {
            loop {
                tokio::time::sleep(LOCK_REFRESH).await;
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("touch {} 2>/dev/null; exit 0", sh_quote(self.lock)),
                    )
                    .await;
            }
        };
        let sent = tokio::select! {
            r = upload => r,
            _ = refresh => unreachable_refresh().map_err(|e| e.to_string()),
        };
        let sent = match sent {
            Ok(n) => n,
            Err(e) => {
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("rm -f {}; exit 0", sh_quote(upload_path)),
                    )
                    .await;
                return Err(BootstrapError::remote(
                    Stage::Upload,
                    &host,
                    format!("upload through the exec stream failed: {e}"),
                ));
            }
        };
        prompter.progress(Stage::Verify, "verifying SHA-256 on the host", None);
        let finish = self.finish_script(tmp, upload_path, attempt);
        self.finish(&finish, sent, None).await
    }

    /// The script that turns the uploaded file into the installed binary (decompress or
    /// apply the delta, check the SHA-256, chmod, move into place, prune, release the lock).
    fn finish_script(&self, tmp: &str, upload_path: &str, attempt: &Attempt) -> String {
        let q = sh_quote;
        let produce = match attempt {
            Attempt::Full(Codec::Raw) => "mv -f \"$up\" \"$tmp\" || fail move".to_string(),
            Attempt::Full(c) => format!(
                "{dec} \"$up\" > \"$tmp\" || fail {name}",
                dec = c.host_decoder().unwrap_or("cat"),
                name = c.name()
            ),
            Attempt::Delta { codec, base } => {
                let base_path = format!("{}/{REMOTE_BIN_PREFIX}{}", self.bin_dir, base.build_id);
                let feed = match codec.host_decoder() {
                    Some(dec) => format!("{dec} \"$up\" |"),
                    None => "cat \"$up\" |".to_string(),
                };
                format!(
                    "{feed} {base} apply-delta --base {base} --out \"$tmp\" >/dev/null || fail apply-delta",
                    base = q(&base_path)
                )
            }
        };
        // When the finishing script runs at the head of the next attach, a failure releases
        // the lock (that attach's missing block takes it again for the next try).
        let release_on_fail = if self.attach.is_some() {
            format!("rmdir {} 2>/dev/null; ", q(self.lock))
        } else {
            String::new()
        };
        format!(
            r#"set -u
tmp={tmp}
up={up}
fail() {{ rm -f "$tmp" "$up"; {release_on_fail}echo "${{report}}verify=$1"; exit 0; }}
{produce}
rm -f "$up"
sha=$({tool} "$tmp" 2>/dev/null | awk '{{print $1}}')
[ "$sha" = {sha} ] || fail "mismatch $sha"
chmod 755 "$tmp" && mv -f "$tmp" {final} || fail mvfailed
echo "${{report}}verify=ok"
{prune}
rmdir {lock} 2>/dev/null
exit 0"#,
            tmp = q(tmp),
            up = q(upload_path),
            tool = self.tool,
            sha = q(self.sha),
            final = q(self.final_path),
            prune = self.prune_script(),
            lock = q(self.lock),
        )
    }

    /// Run a finishing script (it prints `${report}verify=<ok|reason>`): on its own, or at
    /// the head of the attach (whose outcome is kept for the caller).
    /// `channel`: a session channel opened for the attach while the upload ran.
    pub(super) async fn finish(
        &self,
        script: &str,
        sent: u64,
        channel: Option<SessionChannel>,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let Some(spec) = self.attach else {
            let out = self
                .conn
                .run_script_at(Stage::Verify, &format!("report=\n{script}"))
                .await?;
            return match parse_kv(&out.stdout, "verify") {
                Some("ok") => Ok(Finish::Ok(sent)),
                Some(other) => Ok(Finish::Failed(format!(
                    "{other}; stderr: {}",
                    out.stderr.trim()
                ))),
                None => Err(BootstrapError::remote(
                    Stage::Verify,
                    &host,
                    format!("verification script failed: {}", out.stderr.trim()),
                )),
            };
        };
        let (outcome, verify) =
            crate::attach::attach_after(self.conn, spec, script, channel).await?;
        match (outcome, verify.as_deref()) {
            // Not there after all: the missing block took the lock again (or could not).
            (AttachOutcome::Missing(probe), v) => {
                if !probe.locked.as_ref().is_some_and(Locked::held) {
                    self.hold.set(false);
                    return Err(BootstrapError::remote(
                        Stage::Verify,
                        &host,
                        format!(
                            "the upload did not install ({}) and the install lock could not be taken again; retry",
                            v.unwrap_or("no verification report")
                        ),
                    ));
                }
                Ok(Finish::Failed(
                    v.unwrap_or("the finishing script printed no verification report")
                        .to_string(),
                ))
            }
            // The build is there (ours, verified): the attach went on.
            (outcome, _) => {
                *self.outcome.lock_or_recover() = Some(outcome);
                Ok(Finish::Ok(sent))
            }
        }
    }
}

/// The SFTP session of an SSH transport; other transports upload through a stream.
pub(super) async fn sftp_of(conn: &dyn Remote) -> Result<reasonix_sftpfs::SftpFs, BootstrapError> {
    match conn.as_ssh() {
        Some(ssh) => ssh.sftp().await,
        None => Err(BootstrapError::remote(
            Stage::Upload,
            conn.host(),
            "this transport has no SFTP (uploads go through the exec stream)",
        )),
    }
}

/// `1.6 MiB`, `240 KiB`.
pub(super) fn human_size(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else {
        format!("{} KiB", n.div_ceil(1024))
    }
}

/// The refresh loop never ends; this keeps the `select!` arms the same type.
pub(super) fn unreachable_refresh<T>() -> Result<T, reasonix_sftpfs::FsError> {
    Err(reasonix_sftpfs::FsError::Other {
        op: "upload",
        path: String::new(),
        message: "lock refresher ended".into(),
    })
}
