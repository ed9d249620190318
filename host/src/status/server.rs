//! A small HTTP/1.1 server for three read-only paths: each connection reads one bounded request head,
//! answers it and closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::runtime::Metrics;

/// The longest request head read.
const MAX_HEAD: usize = 8192;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `/metrics`, `/api/status` and `/` on `addr` until the process ends. Returns the bound address
/// (port 0 picks one).
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics endpoint to {addr}"))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(answer(sock, metrics.clone()));
        }
    });
    Ok(local)
}

/// What a path answers: status line, content type, body.
fn route(method: &str, path: &str, metrics: &Metrics) -> (&'static str, &'static str, String) {
    let path = path.split('?').next().unwrap_or(path);
    if method != "GET" {
        return (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET\n".into(),
        );
    }
    match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/api/status" => match serde_json::to_string(&metrics.status_now()) {
            Ok(json) => ("200 OK", "application/json", json),
            Err(e) => (
                "500 Internal Server Error",
                "text/plain; charset=utf-8",
                format!("status: {e}\n"),
            ),
        },
        "/" | "/index.html" => ("200 OK", "text/html; charset=utf-8", super::PAGE.into()),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found; metrics are at /metrics, the status at / and /api/status\n".into(),
        ),
    }
}

async fn answer(mut sock: TcpStream, metrics: Arc<Metrics>) {
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < MAX_HEAD {
        match tokio::time::timeout(READ_TIMEOUT, sock.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&req);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let (status, ctype, body) = route(method, path, &metrics);
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}
