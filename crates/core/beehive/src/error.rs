//! Errors of the bus. Every failed send hands the message back.

use std::fmt;
use std::time::Duration;

use edgehive_model::{Message, Text};
use thiserror::Error;

/// Why a message could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendErrorKind {
    /// No module or group of that name was registered.
    UnknownTarget,
    /// The module is registered but disabled.
    Disabled,
    /// The mailbox is full (`try_send` only; `send` waits for room).
    Full,
    /// The module was cleaned up, or the bus has shut down.
    Closed,
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendErrorKind::UnknownTarget => "unknown module or group",
            SendErrorKind::Disabled => "module is disabled",
            SendErrorKind::Full => "mailbox is full",
            SendErrorKind::Closed => "module is stopped",
        })
    }
}

/// A message that was not delivered, with the message handed back.
#[derive(Debug, Error)]
#[error("send to {target}: {kind}")]
pub struct SendError {
    /// What went wrong.
    pub kind: SendErrorKind,
    /// The module or group the message was for.
    pub target: Text,
    message: Box<Message>,
}

impl SendError {
    pub(crate) fn new(kind: SendErrorKind, target: Text, message: Message) -> SendError {
        SendError { kind, target, message: Box::new(message) }
    }

    /// The undelivered message.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// Takes the undelivered message back.
    pub fn into_message(self) -> Message {
        *self.message
    }
}

/// Why a waiter was woken without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WaitError {
    /// The module that was waiting was cleaned up.
    #[error("the waiting module was cleaned up")]
    CleanedUp,
}

/// A synchronous send that did not get its response.
#[derive(Debug, Error)]
pub enum SyncError {
    /// The request was not delivered.
    #[error(transparent)]
    Send(#[from] SendError),
    /// No response within the deadline.
    #[error("no response from {target} to {msg_id} within {after:?}")]
    Timeout {
        /// The module asked.
        target: Text,
        /// The request's id.
        msg_id: Text,
        /// The deadline that passed.
        after: Duration,
    },
    /// Some group members did not answer within the deadline.
    #[error("group {group}: no response from {missing:?} within {after:?}")]
    GroupTimeout {
        /// The group asked.
        group: Text,
        /// Members that did not answer.
        missing: Vec<Text>,
        /// Responses that did arrive.
        received: Vec<Message>,
        /// The deadline that passed.
        after: Duration,
    },
    /// The waiting module was cleaned up while it waited.
    #[error("sync request {msg_id} abandoned: {cause}")]
    Abandoned {
        /// The request's id.
        msg_id: Text,
        /// Why.
        cause: WaitError,
    },
    /// A waiter with the same msg_id is already registered.
    #[error("a sync request with msg_id {0} is already waiting")]
    DuplicateId(Text),
}

/// A response that no one waits for (timed out, unknown, or already answered).
#[derive(Debug, Error)]
#[error("no waiter for response to {parent}")]
pub struct RespError {
    /// The parent id the response named.
    pub parent: Text,
    message: Box<Message>,
}

impl RespError {
    pub(crate) fn new(message: Message) -> RespError {
        RespError { parent: message.header.parent_msg_id.clone(), message: Box::new(message) }
    }

    /// Takes the response back.
    pub fn into_message(self) -> Message {
        *self.message
    }
}

/// What a module's `run` may fail with.
pub type ModuleError = Box<dyn std::error::Error + Send + Sync + 'static>;
