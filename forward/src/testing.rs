//! An in-memory transport that can be cut, stalled and resumed on demand (test seam).
