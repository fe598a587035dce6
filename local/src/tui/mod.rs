//! TUI (stub while building).
