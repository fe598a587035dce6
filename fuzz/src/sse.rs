//! The provider SSE stream (`reasonix_local::gateway::sse`) and both wire formats' parsers
//! (`gateway::openai`, `gateway::anthropic::stream`).

use reasonix_forward::proto::ProviderChunk;
use reasonix_local::gateway::anthropic::stream::MessageStream;
use reasonix_local::gateway::openai::StreamAssembler;
use reasonix_local::gateway::sse::{classify_line, SseLine, SseLines};
use reasonix_local::gateway::wire::StreamParser;

/// Runs a byte stream through the line splitter (fed `step` bytes at a time) and the
/// OpenAI assembler, returning the lines and the chunks.
fn run(stream: &[u8], step: usize) -> (Vec<String>, Vec<ProviderChunk>) {
    let mut lines = SseLines::new();
    let mut all = Vec::new();
    for chunk in stream.chunks(step.max(1)) {
        all.extend(lines.push(chunk));
    }
    all.extend(lines.finish());
    let mut asm = StreamAssembler::new("fuzz-model");
    let mut chunks = Vec::new();
    for l in &all {
        match classify_line(l) {
            SseLine::Data(payload) => chunks.extend(asm.data(payload)),
            SseLine::Ignorable | SseLine::Other(_) => {}
        }
    }
    let _ = (asm.saw_done(), asm.has_finish_reason(), asm.payloads());
    chunks.extend(asm.finish(Some("fuzz")));
    (all, chunks)
}

/// The same byte stream through the Anthropic parser (through the trait the gateway uses):
/// it must never panic, and stops at its first error as the gateway does.
fn run_anthropic(stream: &[u8], step: usize) -> Vec<ProviderChunk> {
    let mut lines = SseLines::new();
    let mut all = Vec::new();
    for chunk in stream.chunks(step.max(1)) {
        all.extend(lines.push(chunk));
    }
    all.extend(lines.finish());
    let mut p: Box<dyn StreamParser> = Box::new(MessageStream::new("fuzz-model"));
    let mut chunks = Vec::new();
    for l in &all {
        if let SseLine::Data(payload) = classify_line(l) {
            let out = p.data(payload);
            let failed = out.iter().any(|c| matches!(c, ProviderChunk::Error { .. }));
            chunks.extend(out);
            if failed || p.saw_end() {
                return chunks;
            }
        }
    }
    let _ = p.answer_complete();
    chunks.extend(p.finish(Some("fuzz")));
    chunks
}

/// Tool calls without an id get a random one; mask it so two runs compare.
fn masked(chunks: Vec<ProviderChunk>) -> Vec<ProviderChunk> {
    chunks
        .into_iter()
        .map(|c| match c {
            ProviderChunk::ToolCall(mut t) if t.id.starts_with("call_") => {
                t.id = "call_*".into();
                ProviderChunk::ToolCall(t)
            }
            other => other,
        })
        .collect()
}

/// SSE: byte 0 picks the network chunk size, the rest is the response body. Whatever the
/// chunking (UTF-8 sequences and `\r\n` split across reads), the lines and the chunks must
/// be the same as for the body read at once.
pub fn sse(data: &[u8]) {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let (lines_whole, chunks_whole) = run(body, body.len());
    let (lines_cut, chunks_cut) = run(body, usize::from(step % 32) + 1);
    assert_eq!(lines_whole, lines_cut, "network chunking changed the lines");
    assert_eq!(
        masked(chunks_whole),
        masked(chunks_cut),
        "network chunking changed the chunks"
    );
    assert_eq!(
        masked(run_anthropic(body, body.len())),
        masked(run_anthropic(body, usize::from(step % 32) + 1)),
        "network chunking changed the Anthropic chunks"
    );
}
