//! A small real HTTP/1.1 server for the `web_fetch` tests: answers by path and records each
//! request's path and `Host` header.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A small HTTP/1.1 server: answers by path, records each request's path and Host header.
pub async fn serve() -> (u16, Arc<Mutex<Vec<(String, String)>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let host = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("host:")
                            .map(|h| h.trim().to_string())
                    })
                    .unwrap_or_default();
                log.lock().unwrap().push((path.clone(), host));
                let (status, headers, body): (&str, String, Vec<u8>) = match path.as_str() {
                    "/page" => (
                        "200 OK",
                        "Content-Type: text/html; charset=utf-8\r\n".into(),
                        PAGE.as_bytes().to_vec(),
                    ),
                    "/hop" => ("302 Found", "Location: /page\r\n".into(), vec![]),
                    "/to-private" => (
                        "302 Found",
                        "Location: http://10.255.255.1/secret\r\n".into(),
                        vec![],
                    ),
                    "/to-other" => (
                        "301 Moved Permanently",
                        "Location: http://example.invalid/elsewhere\r\n".into(),
                        vec![],
                    ),
                    "/img.png" => (
                        "200 OK",
                        "Content-Type: image/png\r\n".into(),
                        vec![0x89; 2048],
                    ),
                    "/big.txt" => (
                        "200 OK",
                        "Content-Type: text/plain\r\n".into(),
                        "0123456789".repeat(10_000).into_bytes(),
                    ),
                    "/large.html" => {
                        let mut page = String::from("<html><body><h1>Large</h1>");
                        for i in 0..3000 {
                            page.push_str(&format!("<p>paragraph number {i} of a long page</p>"));
                        }
                        page.push_str("<p>THE END</p></body></html>");
                        (
                            "200 OK",
                            "Content-Type: text/html\r\n".into(),
                            page.into_bytes(),
                        )
                    }
                    _ => (
                        "404 Not Found",
                        "Content-Type: text/plain\r\n".into(),
                        b"nope".to_vec(),
                    ),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (port, seen)
}

pub const PAGE: &str =
    "<html><head><title>Docs</title><style>p { color: red }</style></head><body>\
<h1>Hello Docs</h1><p>Some <b>bold</b> text and a <a href=\"/x\">link</a>.</p>\
<ul><li>first item</li><li>second item</li></ul></body></html>";
