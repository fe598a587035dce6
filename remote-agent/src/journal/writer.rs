//! The journal writer: one thread per open session owns the journal file, so no async worker
//! ever blocks on a `write` or an `fsync`, and no file I/O happens under the session's lock.
//!
//! The session numbers an event, keeps it in memory and queues its line here (a short
//! critical section with no I/O). The thread writes what is queued in one `write` per batch:
//! - text and reasoning deltas wait up to [`DELTA_BATCH_WINDOW`] (or until
//!   [`BATCH_BYTES`] are queued) so a streamed answer is a handful of writes, not one per
//!   token;
//! - every other event is written as soon as the thread gets to it (no fsync), so a daemon
//!   killed with `kill -9` loses at most the deltas of the last window;
//! - a [`Barrier`] asks for everything queued so far to be written **and fsynced**; the
//!   session waits on it (asynchronously) exactly at its durability points: session creation,
//!   a submitted turn, before a tool starts, an approval asked and answered, a turn's end, a
//!   rewind and daemon shutdown (see `docs/SPEC.md`).
//!
//! A failed write (disk full, read-only directory) keeps the lines queued, in order, and
//! fails the barriers waiting for them; the next barrier tries again, so once space is back
//! nothing is missing from the file. The queue is bounded by backpressure: a producer asks
//! [`JournalWriter::over_high_water`] and waits on a barrier when it is over.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use reasonix_forward::proto::{Event, EventKind};
use reasonix_forward::sync::{CondvarExt, LockExt};
use tokio::sync::watch;

use super::{encode, now_rfc3339, JournalError};

/// How long text deltas may wait to be written together with later ones.
pub const DELTA_BATCH_WINDOW: Duration = Duration::from_millis(50);
/// Queued bytes at which deltas are written without waiting for the window.
pub const BATCH_BYTES: usize = 64 * 1024;
/// Queued bytes above which a producer should wait for the writer (backpressure).
pub const HIGH_WATER_BYTES: usize = 8 * 1024 * 1024;

/// Where the writer puts the lines: the journal file, or a fake in unit tests.
pub trait JournalSink: Send {
    /// Append whole lines, all or nothing.
    fn append(&mut self, bytes: &[u8]) -> Result<(), JournalError>;
    /// Make everything appended durable.
    fn sync(&mut self) -> Result<(), JournalError>;
}

/// Work run on the writer thread once everything queued before it is durable (or with the
/// error that prevented it).
type Op = Box<dyn FnOnce(Result<(), JournalError>) + Send>;

#[derive(Default)]
struct Queue {
    /// Encoded lines not yet written, in sequence order.
    pending: Vec<u8>,
    /// Seq of the last line in `pending`.
    pending_last: u64,
    /// Something other than a delta is queued (or the batch is big): write without waiting.
    urgent: bool,
    /// Highest seq a barrier wants durable.
    sync_target: u64,
    /// Bumped by every barrier, so a failure is reported only to barriers it covered.
    epoch: u64,
    /// Ordered work after a flush (rewind).
    ops: std::collections::VecDeque<Op>,
    /// The session is gone: flush, sync and stop.
    closing: bool,
}

/// Written/durable marks and the last failure, published to waiting barriers.
#[derive(Debug, Clone, Default)]
struct Progress {
    durable: u64,
    failure: Option<(u64, JournalError)>,
}

struct Shared {
    path: PathBuf,
    queue: Mutex<Queue>,
    wake: Condvar,
    progress: watch::Sender<Progress>,
}

/// A session's handle on its journal writer. Dropping it flushes, fsyncs and ends the
/// thread.
pub struct JournalWriter {
    path: PathBuf,
    next_seq: u64,
    shared: Arc<Shared>,
}

impl JournalWriter {
    /// Start the writer thread for `sink` (the journal at `path`, whose events so far end at
    /// `last_seq` and are durable).
    pub fn start(
        path: &Path,
        last_seq: u64,
        sink: Box<dyn JournalSink>,
    ) -> Result<JournalWriter, JournalError> {
        let (progress, _) = watch::channel(Progress {
            durable: last_seq,
            failure: None,
        });
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            queue: Mutex::new(Queue {
                pending_last: last_seq,
                sync_target: last_seq,
                ..Queue::default()
            }),
            wake: Condvar::new(),
            progress,
        });
        let thread_shared = Arc::clone(&shared);
        let name = format!(
            "journal-{}",
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&thread_shared, sink, last_seq))
            .map_err(|e| JournalError::io(path, e))?;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            next_seq: last_seq + 1,
            shared,
        })
    }

    /// Number the event, queue its line and return it. Never blocks on I/O.
    pub fn append(&mut self, turn: u64, kind: EventKind) -> Event {
        let lazy = matches!(
            kind,
            EventKind::TextDelta { .. } | EventKind::ReasoningDelta { .. }
        );
        let event = Event {
            seq: self.next_seq,
            ts: now_rfc3339(),
            turn,
            kind,
        };
        self.next_seq += 1;
        match encode(&event) {
            Ok(line) => {
                let mut q = self.shared.queue.lock_or_recover();
                q.pending.extend_from_slice(&line);
                q.pending_last = event.seq;
                if !lazy || q.pending.len() >= BATCH_BYTES {
                    q.urgent = true;
                }
                drop(q);
                self.shared.wake.notify_one();
            }
            // Serialising an `Event` cannot fail (all map keys are strings); if it ever did,
            // the event still reaches clients from memory and the log says what is missing.
            Err(e) => tracing::error!(seq = event.seq, "journal line not encodable: {e}"),
        }
        event
    }

    /// Ask for everything appended so far to be written and fsynced; wait on the result.
    pub fn barrier(&self) -> Barrier {
        let target = self.next_seq - 1;
        let mut q = self.shared.queue.lock_or_recover();
        q.sync_target = q.sync_target.max(target);
        q.epoch += 1;
        let epoch = q.epoch;
        drop(q);
        self.shared.wake.notify_one();
        Barrier {
            path: self.path.clone(),
            target,
            epoch,
            progress: self.shared.progress.subscribe(),
        }
    }

    /// Run `op` on the writer thread once everything appended so far is durable (or with the
    /// error that prevented it).
    pub fn after_flush(&self, op: impl FnOnce(Result<(), JournalError>) + Send + 'static) {
        let target = self.next_seq - 1;
        let mut q = self.shared.queue.lock_or_recover();
        q.sync_target = q.sync_target.max(target);
        q.epoch += 1;
        q.ops.push_back(Box::new(op));
        drop(q);
        self.shared.wake.notify_one();
    }

    /// True when so much is queued that the producer should wait on a [`Barrier`].
    pub fn over_high_water(&self) -> bool {
        self.shared.queue.lock_or_recover().pending.len() >= HIGH_WATER_BYTES
    }

    /// Make the next event number at least `seq + 1` (numbers are never reused).
    pub fn continue_after(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq + 1);
    }

    /// Highest sequence number handed out.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Path of the journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for JournalWriter {
    fn drop(&mut self) {
        self.shared.queue.lock_or_recover().closing = true;
        self.shared.wake.notify_one();
    }
}

/// A pending durability point: everything up to `target` written and fsynced.
pub struct Barrier {
    path: PathBuf,
    target: u64,
    epoch: u64,
    progress: watch::Receiver<Progress>,
}

impl Barrier {
    /// Wait until the events are durable, or the attempt covering them failed.
    pub async fn wait(mut self) -> Result<(), JournalError> {
        loop {
            {
                let p = self.progress.borrow_and_update();
                if p.durable >= self.target {
                    return Ok(());
                }
                if let Some((epoch, err)) = &p.failure {
                    if *epoch >= self.epoch {
                        return Err(err.clone());
                    }
                }
            }
            if self.progress.changed().await.is_err() {
                return Err(JournalError::WriterGone { path: self.path });
            }
        }
    }
}

/// Fails every barrier, present and future, once the writer thread is gone (it ended, or a
/// panic unwound it), so no waiter hangs.
struct ExitGuard<'a>(&'a Shared);

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        let err = JournalError::WriterGone {
            path: self.0.path.clone(),
        };
        self.0
            .progress
            .send_modify(|p| p.failure = Some((u64::MAX, err)));
    }
}

/// The writer thread.
fn run(shared: &Shared, mut sink: Box<dyn JournalSink>, last_seq: u64) {
    let _exit = ExitGuard(shared);
    let mut durable = last_seq;
    let mut written = last_seq;
    // After a failed attempt, wait for a new event or barrier instead of retrying on a
    // timer (a full disk is not fixed by spinning).
    let mut failed: Option<u64> = None;
    loop {
        let mut q = shared.queue.lock_or_recover();
        loop {
            let retry_sync = match failed {
                None => q.sync_target > durable,
                Some(epoch) => q.sync_target > durable && q.epoch > epoch,
            };
            let work = q.urgent || q.closing || !q.ops.is_empty() || retry_sync;
            if work {
                break;
            }
            if !q.pending.is_empty() && failed.is_none() {
                let (g, timeout) = shared.wake.wait_timeout_or_recover(q, DELTA_BATCH_WINDOW);
                q = g;
                if timeout.timed_out() {
                    break;
                }
            } else {
                q = shared.wake.wait_or_recover(q);
            }
        }
        let batch = std::mem::take(&mut q.pending);
        let batch_last = q.pending_last;
        q.urgent = false;
        let target = q.sync_target;
        let epoch = q.epoch;
        // An op runs only after what was queued before it; later appends wait for the next
        // round (they are in `pending` again by then).
        let op = q.ops.pop_front();
        let closing = q.closing;
        drop(q);

        let mut result = Ok(());
        if !batch.is_empty() {
            result = sink.append(&batch);
            if result.is_ok() {
                written = batch_last;
            }
        }
        if result.is_ok() && written > durable && (target > durable || op.is_some() || closing) {
            result = sink.sync();
            if result.is_ok() {
                durable = written;
            }
        }
        match &result {
            Ok(()) => {
                failed = None;
                shared.progress.send_modify(|p| p.durable = durable);
            }
            Err(e) => {
                tracing::error!("{e}");
                failed = Some(epoch);
                if !batch.is_empty() && written < batch_last {
                    // Keep the lines, in front of anything queued meanwhile.
                    let mut q = shared.queue.lock_or_recover();
                    let mut back = batch;
                    back.extend_from_slice(&q.pending);
                    q.pending = back;
                }
                shared
                    .progress
                    .send_modify(|p| p.failure = Some((epoch, e.clone())));
            }
        }
        if let Some(op) = op {
            op(result.clone());
        }
        if closing {
            let q = shared.queue.lock_or_recover();
            if q.pending.is_empty() && q.ops.is_empty() || result.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// What the fake sink saw, in order.
    #[derive(Debug, Clone, PartialEq)]
    enum Op {
        Write(Vec<u64>),
        Sync,
    }

    #[derive(Clone, Default)]
    struct Fake {
        log: Arc<Mutex<Vec<Op>>>,
        fail: Arc<AtomicBool>,
        /// While held by the test, the next write waits (so appends pile up meanwhile).
        gate: Arc<Mutex<()>>,
    }

    impl JournalSink for Fake {
        fn append(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
            let _g = self.gate.lock_or_recover();
            if self.fail.load(Ordering::SeqCst) {
                return Err(JournalError::io(
                    Path::new("/fake/s.jsonl"),
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
            let seqs = bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice::<Event>(l).expect("line").seq)
                .collect();
            self.log.lock().expect("log").push(Op::Write(seqs));
            Ok(())
        }

        fn sync(&mut self) -> Result<(), JournalError> {
            self.log.lock().expect("log").push(Op::Sync);
            Ok(())
        }
    }

    fn notice(t: &str) -> EventKind {
        EventKind::Notice { text: t.into() }
    }

    fn delta(t: &str) -> EventKind {
        EventKind::TextDelta { text: t.into() }
    }

    fn written(log: &[Op]) -> Vec<u64> {
        log.iter()
            .flat_map(|o| match o {
                Op::Write(s) => s.clone(),
                Op::Sync => Vec::new(),
            })
            .collect()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn order_is_kept_and_a_barrier_means_written_then_synced() {
        let fake = Fake::default();
        let mut w = JournalWriter::start(Path::new("/fake/s.jsonl"), 0, Box::new(fake.clone()))
            .expect("start");
        for i in 0..200 {
            if i % 10 == 0 {
                w.append(1, notice("n"));
            } else {
                w.append(1, delta("d"));
            }
        }
        let b = w.barrier();
        rt().block_on(b.wait()).expect("durable");
        let log = fake.log.lock().expect("log").clone();
        assert_eq!(written(&log), (1..=200).collect::<Vec<_>>(), "{log:?}");
        // The barrier resolved only after the write holding seq 200 was followed by a sync.
        let last_write = log
            .iter()
            .rposition(|o| matches!(o, Op::Write(s) if s.contains(&200)))
            .expect("write of 200");
        assert!(
            log[last_write..].contains(&Op::Sync),
            "no sync after the last write: {log:?}"
        );
        // Nothing was fsynced that no barrier asked for: one barrier, at most one sync.
        assert_eq!(log.iter().filter(|o| **o == Op::Sync).count(), 1, "{log:?}");
    }

    #[test]
    fn deltas_queued_during_a_write_go_out_in_one_batch() {
        let fake = Fake::default();
        let mut w = JournalWriter::start(Path::new("/fake/s.jsonl"), 0, Box::new(fake.clone()))
            .expect("start");
        let gate = fake.gate.lock().expect("gate");
        // The writer picks this up and blocks inside the write on the gate.
        w.append(1, notice("start"));
        while w.shared.queue.lock_or_recover().urgent {
            std::thread::yield_now();
        }
        for _ in 0..500 {
            w.append(1, delta("tok"));
        }
        w.append(1, notice("end"));
        drop(gate);
        rt().block_on(w.barrier().wait()).expect("durable");
        let log = fake.log.lock().expect("log").clone();
        let writes = log.iter().filter(|o| matches!(o, Op::Write(_))).count();
        assert_eq!(
            writes, 2,
            "one write for the first event, one for the rest: {log:?}"
        );
        assert_eq!(written(&log), (1..=502).collect::<Vec<_>>());
    }

    #[test]
    fn a_failed_write_fails_the_barrier_and_the_retry_writes_everything_once() {
        let fake = Fake::default();
        let mut w = JournalWriter::start(Path::new("/fake/s.jsonl"), 7, Box::new(fake.clone()))
            .expect("start");
        fake.fail.store(true, Ordering::SeqCst);
        let first = w.append(1, notice("a"));
        assert_eq!(
            first.seq, 8,
            "numbering continues after the journal's last event"
        );
        w.append(1, delta("b"));
        let err = rt().block_on(w.barrier().wait()).expect_err("disk full");
        assert!(err.to_string().contains("/fake/s.jsonl"), "{err}");
        assert!(err.advice().contains("disk is full"), "{}", err.advice());
        // Events keep coming while the disk is full; none is lost or duplicated.
        w.append(1, notice("c"));
        let err2 = rt().block_on(w.barrier().wait());
        assert!(err2.is_err());
        fake.fail.store(false, Ordering::SeqCst);
        w.append(1, notice("d"));
        rt().block_on(w.barrier().wait()).expect("space is back");
        let log = fake.log.lock().expect("log").clone();
        assert_eq!(written(&log), vec![8, 9, 10, 11], "{log:?}");
    }

    struct Panics;

    impl JournalSink for Panics {
        fn append(&mut self, _: &[u8]) -> Result<(), JournalError> {
            panic!("sink bug");
        }
        fn sync(&mut self) -> Result<(), JournalError> {
            Ok(())
        }
    }

    #[test]
    fn a_writer_that_died_fails_barriers_instead_of_hanging_them() {
        let mut w =
            JournalWriter::start(Path::new("/fake/p.jsonl"), 0, Box::new(Panics)).expect("start");
        w.append(1, notice("a"));
        let err = rt().block_on(w.barrier().wait()).expect_err("writer gone");
        assert!(matches!(err, JournalError::WriterGone { .. }), "{err}");
        w.append(1, notice("b"));
        assert!(rt().block_on(w.barrier().wait()).is_err());
    }

    #[test]
    fn after_flush_runs_in_order_and_drop_flushes() {
        let fake = Fake::default();
        let mut w = JournalWriter::start(Path::new("/fake/s.jsonl"), 0, Box::new(fake.clone()))
            .expect("start");
        w.append(1, notice("a"));
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = fake.log.clone();
        w.after_flush(move |r| {
            let _ = tx.send((r.is_ok(), seen.lock().expect("log").clone()));
        });
        let (ok, at_op) = rx.recv().expect("op ran");
        assert!(ok);
        assert_eq!(at_op, vec![Op::Write(vec![1]), Op::Sync]);
        w.append(1, delta("tail"));
        drop(w);
        // The thread flushes and syncs on its way out.
        for _ in 0..1000 {
            if fake.log.lock().expect("log").len() == 4 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let log = fake.log.lock().expect("log").clone();
        assert_eq!(
            log,
            vec![Op::Write(vec![1]), Op::Sync, Op::Write(vec![2]), Op::Sync]
        );
    }
}
