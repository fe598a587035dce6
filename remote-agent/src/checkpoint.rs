//! TODO: checkpoint
