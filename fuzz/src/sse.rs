//! The provider SSE stream (`reasonix_local::gateway::sse`).

use reasonix_forward::proto::ProviderChunk;
use reasonix_local::gateway::sse::{classify_line, SseLine, SseLines, StreamAssembler};

/// Runs a byte stream through the line splitter (fed `step` bytes at a time) and the
/// assembler, returning the lines and the chunks.
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
}
