//! Scripted OpenAI-compatible mock provider (real HTTP server streaming SSE).
