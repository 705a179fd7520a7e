//! A tiny HTTP/1.1 client over a raw TCP stream, enough to check status,
//! headers and body of a server on loopback without another HTTP stack.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one request may take, connecting included.
const DEADLINE: Duration = Duration::from_secs(10);

/// A parsed response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    /// The first header named `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// `GET path` on `addr`, retrying the connection until the server listens;
/// panics past the deadline.
pub(crate) async fn get(addr: SocketAddr, path: &str) -> Reply {
    tokio::time::timeout(DEADLINE, exchange(addr, path))
        .await
        .unwrap_or_else(|_| panic!("GET {path} on {addr}: no answer within {DEADLINE:?}"))
}

async fn exchange(addr: SocketAddr, path: &str) -> Reply {
    let mut stream = loop {
        match TcpStream::connect(addr).await {
            Ok(stream) => break stream,
            // Not listening yet: poll again (the caller's timeout bounds this).
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: */*\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = std::str::from_utf8(&raw[..split]).expect("an ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("a header line");
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let reply = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    assert!(
        reply.header("transfer-encoding").is_none(),
        "chunked bodies are not supported by this client"
    );
    if let Some(len) = reply.header("content-length") {
        body.truncate(len.parse().expect("a numeric content-length"));
    }
    Reply { body, ..reply }
}
