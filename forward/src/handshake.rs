//! The preamble line and the `Hello`/`Welcome` exchange that open every transport.

use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use crate::link::LinkError;
use crate::proto::{Hello, Welcome};

/// Client side: skip every byte before the preamble line (shell banners, rc-file noise, at
/// most `max_garbage` bytes), check it, send `hello`, and read the `Welcome`. Returns the
/// buffered reader (any bytes read past the welcome stay in it) and the welcome.
pub async fn client_handshake<R, W>(
    reader: R,
    writer: &mut W,
    hello: &Hello,
    max_garbage: usize,
) -> Result<(BufReader<R>, Welcome), LinkError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let _ = (reader, writer, hello, max_garbage);
    todo!("client_handshake")
}

/// Server side: write the preamble line with `build_id`, then read the client's `Hello`.
pub async fn server_accept<R, W>(
    reader: R,
    writer: &mut W,
    build_id: &str,
) -> Result<(BufReader<R>, Hello), LinkError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let _ = (reader, writer, build_id);
    todo!("server_accept")
}

/// Server side: send the `Welcome` (after deciding whether the link resumes).
pub async fn server_welcome<W>(writer: &mut W, welcome: &Welcome) -> Result<(), LinkError>
where
    W: AsyncWrite + Unpin,
{
    let _ = (writer, welcome);
    todo!("server_welcome")
}
