//! TODO: attach
