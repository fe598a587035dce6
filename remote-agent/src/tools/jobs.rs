//! Process plumbing for bash: one pipe for stdout+stderr (so the interleaving is what a
//! terminal would show), its own process group, group kill, and the background job table.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reasonix_forward::sync::LockExt;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Identifier of a background job (`job_1`, `job_2`, ...).
pub type JobId = String;

/// The last step of a background job, run (blocking) after its process group is gone and
/// before its status turns final: given the job's output, it returns text to append to it
/// (the deny-rule check uses it).
pub(crate) type FinishHook = Box<dyn FnOnce(&str) -> Option<String> + Send + 'static>;

/// Bytes of output a background job keeps; older bytes are dropped (and reported).
pub const JOB_OUTPUT_CAP: usize = 8 * 1024 * 1024;
/// Finished jobs a session remembers (their output stays readable); older ones are forgotten.
pub const MAX_FINISHED_JOBS: usize = 16;
/// How long a finished job stays readable at most.
pub const FINISHED_JOB_TTL: Duration = Duration::from_secs(60 * 60);
/// How long to wait for the output pipe to close after the process group was killed (a
/// process that left the group can hold it open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Where a background job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Still running.
    Running,
    /// Exited by itself with this code.
    Exited(i32),
    /// Ended by a signal it did not get from `kill_shell`.
    Signaled(i32),
    /// Stopped by `kill_shell` (or the session ending).
    Killed,
}

impl JobStatus {
    /// True once the job has ended.
    pub fn is_finished(self) -> bool {
        !matches!(self, JobStatus::Running)
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobStatus::Running => write!(f, "running"),
            JobStatus::Exited(c) => write!(f, "exited with code {c}"),
            JobStatus::Signaled(s) => write!(f, "killed by signal {s}"),
            JobStatus::Killed => write!(f, "killed"),
        }
    }
}

/// Captured output: a ring buffer with a cap that drops the oldest bytes (in O(dropped), never
/// by moving what is kept) and counts them.
#[derive(Debug, Default)]
pub(crate) struct OutBuf {
    data: VecDeque<u8>,
    /// Bytes dropped from the front so far.
    dropped: u64,
    /// Absolute position up to which `bash_output` has returned output.
    read_pos: u64,
    cap: usize,
}

impl OutBuf {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        // Of a chunk bigger than the cap only its tail can be kept.
        let keep = &bytes[bytes.len().saturating_sub(self.cap)..];
        self.dropped += (bytes.len() - keep.len()) as u64;
        let excess = (self.data.len() + keep.len()).saturating_sub(self.cap);
        if excess > 0 {
            self.data.drain(..excess);
            self.dropped += excess as u64;
        }
        self.data.extend(keep);
    }

    /// Everything kept, and how many bytes were dropped before it.
    pub(crate) fn all(&self) -> (Vec<u8>, u64) {
        let (a, b) = self.data.as_slices();
        ([a, b].concat(), self.dropped)
    }

    /// Output not yet returned by [`OutBuf::take_new`], and how many unread bytes were lost.
    pub(crate) fn take_new(&mut self) -> (Vec<u8>, u64) {
        let lost = self.dropped.saturating_sub(self.read_pos);
        let start = self.read_pos.max(self.dropped);
        let from = (start - self.dropped) as usize;
        let out = self.data.range(from..).copied().collect();
        self.read_pos = self.dropped + self.data.len() as u64;
        (out, lost)
    }
}

/// A started process: its child handle, group id, output and the task filling it.
pub(crate) struct Running {
    pub child: tokio::process::Child,
    pub pgid: i32,
    pub out: Arc<Mutex<OutBuf>>,
    pub reader: JoinHandle<()>,
}

/// Starts `cmd` in its own process group with stdout and stderr on one pipe.
pub(crate) fn spawn_captured(
    mut cmd: tokio::process::Command,
    cap: usize,
) -> std::io::Result<Running> {
    let (read_end, write_end) = pipe()?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(write_end.try_clone()?))
        .stderr(std::process::Stdio::from(write_end))
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn()?;
    // Dropping the command closes our copies of the write end, so EOF arrives when the
    // process group is gone.
    drop(cmd);
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let out = Arc::new(Mutex::new(OutBuf::new(cap)));
    let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(read_end)?;
    let sink = out.clone();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rx.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.lock_or_recover().push(&buf[..n]),
            }
        }
    });
    Ok(Running {
        child,
        pgid,
        out,
        reader,
    })
}

/// A pipe whose read end is non-blocking (for tokio) and whose write end is blocking (for
/// the child). Both are close-on-exec; the child gets dup2'ed copies.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own; flags come from F_GETFL on the same descriptor.
    unsafe {
        let flags = libc::fcntl(fds[0], libc::F_GETFL);
        if flags < 0 || libc::fcntl(fds[0], libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((r, w))
}

/// SIGKILLs every process in group `pgid` (ignores a group that is already gone).
pub(crate) fn kill_group(pgid: i32) {
    // Guard against 0/1/negative: killpg(0) would hit our own group.
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// After the leader exited or was killed: kill the rest of the group, then let the reader
/// finish (bounded, because a process that left the group may keep the pipe open).
pub(crate) async fn finish(pgid: i32, reader: &mut JoinHandle<()>) {
    kill_group(pgid);
    if tokio::time::timeout(DRAIN_GRACE, &mut *reader)
        .await
        .is_err()
    {
        reader.abort();
    }
}

fn status_of(st: std::process::ExitStatus, killed: bool) -> JobStatus {
    use std::os::unix::process::ExitStatusExt;
    if killed {
        return JobStatus::Killed;
    }
    match (st.code(), st.signal()) {
        (Some(c), _) => JobStatus::Exited(c),
        (None, Some(s)) => JobStatus::Signaled(s),
        (None, None) => JobStatus::Exited(-1),
    }
}

pub(crate) fn exit_status(st: std::process::ExitStatus) -> JobStatus {
    status_of(st, false)
}

/// One background bash job.
pub struct Job {
    id: JobId,
    command: String,
    pgid: i32,
    out: Arc<Mutex<OutBuf>>,
    status: watch::Receiver<JobStatus>,
    killed: Arc<AtomicBool>,
    finished_at: Arc<OnceLock<Instant>>,
}

impl Job {
    /// The job id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The command line it runs.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Its process group id.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Where it is now.
    pub fn status(&self) -> JobStatus {
        *self.status.borrow()
    }

    /// Output since the previous call, lossily decoded, and how many unread bytes the cap
    /// dropped.
    pub fn take_new_output(&self) -> (String, u64) {
        let (bytes, lost) = self.out.lock_or_recover().take_new();
        (String::from_utf8_lossy(&bytes).into_owned(), lost)
    }

    /// All output kept so far (does not move the read position).
    pub fn full_output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock_or_recover().all().0).into_owned()
    }

    /// Waits until the job ends, or `timeout` passes; returns the status then.
    pub async fn wait(&self, timeout: Duration) -> JobStatus {
        let mut rx = self.status.clone();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|s| s.is_finished())).await;
        self.status()
    }

    /// Kills the whole process group. Returns false when the job had already finished.
    pub fn kill(&self) -> bool {
        if self.status().is_finished() {
            return false;
        }
        self.killed.store(true, Ordering::SeqCst);
        kill_group(self.pgid);
        true
    }
}

/// Background jobs of one session. Owned by the daemon session, so jobs keep running while no
/// client is attached; dropping the table kills whatever still runs. Finished jobs are
/// forgotten beyond [`MAX_FINISHED_JOBS`] or after [`FINISHED_JOB_TTL`].
#[derive(Default)]
pub struct JobTable {
    /// Keyed by job number (start order). Numbers count per session: ids name jobs of the
    /// session asking, so another session's `job_1` is simply not in this table.
    inner: Mutex<BTreeMap<u64, Arc<Job>>>,
    last_number: AtomicU64,
}

fn job_number(id: &str) -> Option<u64> {
    id.strip_prefix("job_")?.parse().ok()
}

impl JobTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `cmd` as a background job (needs a tokio runtime).
    pub fn spawn(
        &self,
        cmd: tokio::process::Command,
        command_text: &str,
    ) -> std::io::Result<Arc<Job>> {
        self.spawn_with(cmd, command_text, None)
    }

    /// [`JobTable::spawn`] with a last step run when the job ends (see [`FinishHook`]); a
    /// reader sees the job finished only once the step's text is in its output.
    pub(crate) fn spawn_with(
        &self,
        cmd: tokio::process::Command,
        command_text: &str,
        on_finish: Option<FinishHook>,
    ) -> std::io::Result<Arc<Job>> {
        let Running {
            mut child,
            pgid,
            out,
            mut reader,
        } = spawn_captured(cmd, JOB_OUTPUT_CAP)?;
        let (tx, rx) = watch::channel(JobStatus::Running);
        let killed = Arc::new(AtomicBool::new(false));
        let finished_at = Arc::new(OnceLock::new());
        let number = self.last_number.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Arc::new(Job {
            id: format!("job_{number}"),
            command: command_text.to_string(),
            pgid,
            out,
            status: rx,
            killed: killed.clone(),
            finished_at: finished_at.clone(),
        });
        {
            let mut g = self.inner.lock_or_recover();
            prune(&mut g, Instant::now());
            g.insert(number, job.clone());
        }
        let job_out = job.out.clone();
        tokio::spawn(async move {
            let st = child.wait().await;
            finish(pgid, &mut reader).await;
            if let Some(hook) = on_finish {
                let text = {
                    let g = job_out.lock_or_recover();
                    String::from_utf8_lossy(&g.all().0).into_owned()
                };
                if let Ok(Some(extra)) = tokio::task::spawn_blocking(move || hook(&text)).await {
                    let mut g = job_out.lock_or_recover();
                    let sep = match g.data.back() {
                        None | Some(b'\n') => "",
                        Some(_) => "\n",
                    };
                    g.push(format!("{sep}{extra}\n").as_bytes());
                }
            }
            let status = match st {
                Ok(s) => status_of(s, killed.load(Ordering::SeqCst)),
                Err(_) => JobStatus::Exited(-1),
            };
            let _ = finished_at.set(Instant::now());
            let _ = tx.send(status);
        });
        Ok(job)
    }

    /// The job with this id (only this session's jobs).
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        let n = job_number(id)?;
        self.inner.lock_or_recover().get(&n).cloned()
    }

    /// All job ids this session remembers, in start order.
    pub fn ids(&self) -> Vec<JobId> {
        let mut g = self.inner.lock_or_recover();
        prune(&mut g, Instant::now());
        g.values().map(|j| j.id.clone()).collect()
    }

    /// Kills every running job (session end).
    pub fn kill_all(&self) {
        for job in self.inner.lock_or_recover().values() {
            job.kill();
        }
    }
}

/// Forget finished jobs older than [`FINISHED_JOB_TTL`] at `now`, then all but the newest
/// [`MAX_FINISHED_JOBS`] finished ones. Running jobs are always kept.
fn prune(jobs: &mut BTreeMap<u64, Arc<Job>>, now: Instant) {
    jobs.retain(|_, j| match j.finished_at.get() {
        Some(at) => now.saturating_duration_since(*at) < FINISHED_JOB_TTL,
        None => true,
    });
    let finished: Vec<u64> = jobs
        .iter()
        .filter(|(_, j)| j.finished_at.get().is_some())
        .map(|(n, _)| *n)
        .collect();
    for n in finished
        .iter()
        .take(finished.len().saturating_sub(MAX_FINISHED_JOBS))
    {
        jobs.remove(n);
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_buffer_keeps_the_newest_bytes_and_counts_the_rest() {
        let mut b = OutBuf::new(8);
        b.push(b"abcd");
        b.push(b"efgh");
        assert_eq!(b.all(), (b"abcdefgh".to_vec(), 0));
        b.push(b"ij");
        assert_eq!(b.all(), (b"cdefghij".to_vec(), 2));
        // A chunk bigger than the cap keeps only its tail.
        b.push(b"0123456789xyz");
        assert_eq!(b.all(), (b"56789xyz".to_vec(), 15));
        assert_eq!(b.data.len(), 8);
    }

    #[test]
    fn take_new_reports_unread_bytes_lost_to_the_cap() {
        let mut b = OutBuf::new(4);
        b.push(b"ab");
        assert_eq!(b.take_new(), (b"ab".to_vec(), 0));
        assert_eq!(b.take_new(), (Vec::new(), 0));
        // 6 new bytes into a 4-byte ring: 2 unread bytes were lost.
        b.push(b"cdefgh");
        assert_eq!(b.take_new(), (b"efgh".to_vec(), 2));
        b.push(b"i");
        assert_eq!(b.take_new(), (b"i".to_vec(), 0));
    }

    #[test]
    fn ring_buffer_stays_at_its_cap_under_many_small_writes() {
        let mut b = OutBuf::new(1000);
        for i in 0..10_000u32 {
            b.push(&i.to_le_bytes());
        }
        let (data, dropped) = b.all();
        assert_eq!(data.len(), 1000);
        assert_eq!(dropped, 40_000 - 1000);
        // The kept bytes are exactly the newest ones.
        let all: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(data, all[all.len() - 1000..]);
    }

    fn finished_job(n: u64, at: Instant) -> Arc<Job> {
        let (_tx, rx) = watch::channel(JobStatus::Exited(0));
        let finished_at = Arc::new(OnceLock::new());
        let _ = finished_at.set(at);
        Arc::new(Job {
            id: format!("job_{n}"),
            command: "true".into(),
            pgid: 0,
            out: Arc::new(Mutex::new(OutBuf::new(16))),
            status: rx,
            killed: Arc::new(AtomicBool::new(false)),
            finished_at,
        })
    }

    fn running_job(n: u64) -> Arc<Job> {
        let (_tx, rx) = watch::channel(JobStatus::Running);
        Arc::new(Job {
            id: format!("job_{n}"),
            command: "sleep".into(),
            pgid: 0,
            out: Arc::new(Mutex::new(OutBuf::new(16))),
            status: rx,
            killed: Arc::new(AtomicBool::new(false)),
            finished_at: Arc::new(OnceLock::new()),
        })
    }

    #[test]
    fn finished_jobs_are_pruned_by_count_and_age_running_ones_never() {
        let now = Instant::now();
        let mut jobs = BTreeMap::new();
        jobs.insert(1, running_job(1));
        for n in 2..(2 + MAX_FINISHED_JOBS as u64 + 5) {
            jobs.insert(n, finished_job(n, now));
        }
        prune(&mut jobs, now);
        assert!(jobs.contains_key(&1), "a running job is kept");
        assert_eq!(jobs.len(), 1 + MAX_FINISHED_JOBS);
        // The oldest finished ones went first.
        assert!(!jobs.contains_key(&2) && jobs.contains_key(&(2 + 5)));
        // Past the TTL every finished job goes.
        prune(&mut jobs, now + FINISHED_JOB_TTL + Duration::from_secs(1));
        assert_eq!(jobs.keys().copied().collect::<Vec<_>>(), vec![1]);
    }
}
