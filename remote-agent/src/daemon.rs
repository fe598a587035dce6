//! TODO: daemon
