//! TODO: journal
