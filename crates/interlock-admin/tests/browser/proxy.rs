//! A TCP proxy between Chromium and the server that counts, per
//! connection, the bytes the server sends once the browser asked for the
//! event stream: what a tab costs on the wire, HTTP framing and keep-alive
//! comments included. It can also hold the stream back, to show the page
//! before its first message.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What identifies the event stream's request on the wire.
const EVENTS_REQUEST: &[u8] = b"/events HTTP/1.1\r\n";

/// One browser connection.
#[derive(Default)]
pub(crate) struct Conn {
    /// The browser asked for the event stream on it.
    events: AtomicBool,
    /// Bytes the server sent on it since.
    sse_bytes: AtomicU64,
    open: AtomicBool,
}

#[derive(Default)]
struct Shared {
    conns: Mutex<Vec<Arc<Conn>>>,
}

pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    hold: watch::Sender<bool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let (hold, held) = watch::channel(false);
        let accepting = Arc::clone(&shared);
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let conn = Arc::new(Conn {
                    open: AtomicBool::new(true),
                    ..Conn::default()
                });
                accepting.conns.lock().unwrap().push(Arc::clone(&conn));
                tokio::spawn(forward(client, upstream, conn, held.clone()));
            }
        });
        Proxy { addr, shared, hold }
    }

    /// Holds back (or releases) what the server sends on event streams.
    pub(crate) fn hold_events(&self, hold: bool) {
        self.hold.send_replace(hold);
    }

    fn streams(&self) -> Vec<Arc<Conn>> {
        self.shared
            .conns
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.events.load(Ordering::Acquire))
            .cloned()
            .collect()
    }

    /// Bytes sent on every event stream so far, open or closed.
    pub(crate) fn event_bytes(&self) -> u64 {
        self.streams()
            .iter()
            .map(|c| c.sse_bytes.load(Ordering::Acquire))
            .sum()
    }

    /// Event streams still open.
    pub(crate) fn open_streams(&self) -> usize {
        self.streams()
            .iter()
            .filter(|c| c.open.load(Ordering::Acquire))
            .count()
    }

    /// Event streams ever opened.
    pub(crate) fn streams_opened(&self) -> usize {
        self.streams().len()
    }
}

async fn forward(
    client: TcpStream,
    upstream: SocketAddr,
    conn: Arc<Conn>,
    held: watch::Receiver<bool>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        conn.open.store(false, Ordering::Release);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up_conn = Arc::clone(&conn);
    let up = async move {
        // The request line may be split across reads: keep a tail.
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            tail.extend_from_slice(&buf[..n]);
            if tail
                .windows(EVENTS_REQUEST.len())
                .any(|w| w == EVENTS_REQUEST)
            {
                up_conn.events.store(true, Ordering::Release);
            }
            let keep = tail.len().saturating_sub(EVENTS_REQUEST.len());
            tail.drain(..keep);
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down_conn = Arc::clone(&conn);
    let down = async move {
        let mut held = held;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if down_conn.events.load(Ordering::Acquire) {
                while *held.borrow_and_update() {
                    if held.changed().await.is_err() {
                        break;
                    }
                }
                down_conn.sse_bytes.fetch_add(n as u64, Ordering::AcqRel);
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    // Either side ending ends the connection (an SSE stream never ends by
    // itself: the browser closing it is what a hidden tab does).
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    conn.open.store(false, Ordering::Release);
}
