//! TODO: sandbox
