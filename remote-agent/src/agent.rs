//! TODO: agent
