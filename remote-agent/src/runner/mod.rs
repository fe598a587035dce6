//! The runner: drives one conversation (model steps, tool calls, approvals, compaction).

use std::sync::Arc;

use reasonix_forward::content::EXTERNALIZE_OVER;
use reasonix_forward::proto::{
    ApprovalDecision, Denied, Event, EventKind, Notification, ProviderChunk, ProviderRequest,
    ProviderRetry, RetryPhase, ToolCall, TurnOutcome, TurnState, Usage,
};
use reasonix_forward::sync::LockExt;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::agent::{self, Prefix};
use crate::journal::{Barrier, JournalError};
use crate::policy::Decision;
use crate::session::{
    DriverLink, Inner, PendingApproval, Session, DEFAULT_MAX_STEPS, PROVIDER_REISSUES,
};

pub(crate) mod compact;
pub(crate) mod turn;
