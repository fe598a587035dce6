//! TODO: session
