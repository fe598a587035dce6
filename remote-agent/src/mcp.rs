//! TODO: mcp
