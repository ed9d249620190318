//! The HTTP/1.1 server of `--metrics-addr`: three read-only paths, served by hyper (keep-alive, `HEAD`,
//! a bounded request head and a timeout on it).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::runtime::Metrics;

/// The largest request head read (a longer one is refused).
const MAX_HEAD: usize = 8192;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

const TEXT: &str = "text/plain; charset=utf-8";

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
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, Infallible>(answer(&req, &metrics)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(READ_TIMEOUT)
                    .max_buf_size(MAX_HEAD)
                    .serve_connection(TokioIo::new(sock), service)
                    .await;
            });
        }
    });
    Ok(local)
}

fn answer(req: &Request<Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, ctype, body) = route(req.method(), req.uri().path(), metrics);
    let mut resp = Response::builder()
        .status(status)
        .header(CONTENT_TYPE, ctype)
        .header(CACHE_CONTROL, "no-store");
    if status == StatusCode::METHOD_NOT_ALLOWED {
        resp = resp.header(ALLOW, "GET, HEAD");
    }
    // hyper leaves the body out of the answer to a HEAD (keeping its length).
    resp.body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// What a path answers: status, content type, body.
fn route(method: &Method, path: &str, metrics: &Metrics) -> (StatusCode, &'static str, String) {
    if method != Method::GET && method != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "only GET and HEAD\n".into(),
        );
    }
    match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/api/status" => match serde_json::to_string(&metrics.status_now()) {
            Ok(json) => (StatusCode::OK, "application/json", json),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                format!("status: {e}\n"),
            ),
        },
        "/" | "/index.html" => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            super::PAGE.into(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            TEXT,
            "not found; metrics are at /metrics, the status at / and /api/status\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// Sends `requests` on one connection, then reads until the server closes or 2 s pass.
    async fn exchange(addr: SocketAddr, requests: &str) -> String {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(requests.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(Duration::from_secs(2), sock.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn keep_alive_head_and_refusals() {
        let metrics = Metrics::new().unwrap();
        let addr = serve("127.0.0.1:0".parse().unwrap(), metrics)
            .await
            .unwrap();

        // Two requests on one connection (keep-alive), the second closing it.
        let got = exchange(
            addr,
            "GET /api/status HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(got.matches("HTTP/1.1 ").count(), 2, "{got}");
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
        assert!(
            got.contains("application/json") && got.contains("\"parallelism\""),
            "{got}"
        );
        assert!(got.contains("HTTP/1.1 404 Not Found"), "{got}");

        // HEAD: the head with the body's length, no body.
        let got = exchange(
            addr,
            "HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        let (head, body) = got.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{got}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("content-length: {}", super::super::PAGE.len())),
            "{got}"
        );
        assert!(body.is_empty(), "{got}");

        // Other methods: 405 naming what is allowed.
        let got = exchange(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(got.starts_with("HTTP/1.1 405 Method Not Allowed"), "{got}");
        assert!(
            got.to_ascii_lowercase().contains("allow: get, head"),
            "{got}"
        );

        // A request head over the limit is refused, not read for ever.
        let huge = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(MAX_HEAD * 2)
        );
        let got = exchange(addr, &huge).await;
        assert!(
            got.is_empty() || got.starts_with("HTTP/1.1 431"),
            "{}",
            &got[..got.len().min(200)]
        );
    }
}
