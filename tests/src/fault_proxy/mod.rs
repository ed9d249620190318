//! A TCP proxy between a job and the broker that injects network faults (issue 49 §1): reset (RST),
//! stall (nothing forwarded, the connection kept, everything delivered at once afterwards), blackhole
//! (nothing forwarded, never closed until the client gives up), half-close (the client reads EOF, its
//! writes still go through), and a bandwidth cap. Loopback only.
//!
//! Our client connects to the service URL for every topic of a one-broker cluster (the broker's lookup
//! answers `proxy_through_service_url`), so a proxy on the service URL carries the data connections too;
//! [`FaultProxy::stats`] counts what crossed, so a round can check that it did.
//!
//! The proxy reads the client's commands as they pass (each frame's command, not its payload), so a
//! fault can be armed on one: e.g. reset the connection that carries the next `END_TXN` (a checkpoint's
//! commit), before or after forwarding it. It splits what the broker sends into frames too, so one can
//! be lost on the way ([`FaultProxy::lose`]).

mod frames;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use magnetar::proto::pb::base_command::Type;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use frames::Frames;

/// A fault for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Both sides get a TCP reset.
    Reset,
    /// Nothing is forwarded either way for this long; then everything held is delivered.
    Stall(Duration),
    /// Nothing is forwarded ever again; the connection stays open until the client closes it.
    Blackhole,
    /// The client reads EOF; what it still writes goes through to the broker.
    HalfClose,
}

/// Which connections a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// Every open connection.
    All,
    /// Open connections whose client sent a command of this kind (e.g. `Subscribe`: a consumer's,
    /// `Producer`: a producer's, `NewTxn`: the transaction coordinator's).
    Carrying(Type),
}

/// What crossed the proxy and what hit it.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub connections: u64,
    pub bytes_to_broker: u64,
    pub bytes_to_client: u64,
    /// Faults applied, one per connection hit.
    pub faults: u64,
    /// Of those, the ones that hit a connection with traffic in the second before (or armed on a
    /// command in flight).
    pub faults_on_live_traffic: u64,
    /// `SEND` commands forwarded to the broker (messages or batches a producer wrote).
    pub sends: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Forward,
    StallUntil(Instant),
    Blackhole,
    HalfClosed,
    Reset,
}

struct Conn {
    state: watch::Sender<State>,
    commands: Mutex<BTreeSet<i32>>,
    last_traffic: Mutex<Instant>,
    open: std::sync::atomic::AtomicBool,
}

struct Armed {
    on: Type,
    fault: Fault,
    /// Forward the command first (the broker acts on it, its answer is lost) or not.
    after_forwarding: bool,
}

struct Shared {
    upstream: SocketAddr,
    conns: Mutex<Vec<Arc<Conn>>>,
    armed: Mutex<Vec<Armed>>,
    /// Frames to a client to lose, by kind.
    lose: Mutex<Vec<Type>>,
    connections: AtomicU64,
    to_broker: AtomicU64,
    to_client: AtomicU64,
    faults: AtomicU64,
    faults_live: AtomicU64,
    sends: AtomicU64,
    /// Bytes per second per direction and connection; 0: no cap.
    bandwidth: AtomicU64,
}

/// The proxy; stops accepting when dropped (open connections end with their clients).
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Result<FaultProxy> {
        let upstream: SocketAddr = tokio::net::lookup_host(upstream)
            .await?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{upstream}: no address"))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            conns: Mutex::default(),
            armed: Mutex::default(),
            lose: Mutex::default(),
            connections: AtomicU64::new(0),
            to_broker: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            faults_live: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            bandwidth: AtomicU64::new(0),
        });
        let accept = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        if let Ok(broker) = TcpStream::connect(shared.upstream).await {
                            serve(shared, client, broker);
                        }
                    });
                }
            }
        });
        Ok(FaultProxy {
            addr,
            shared,
            accept,
        })
    }

    /// For a Pulsar broker: `pulsar://` plus the service URL's `host:port`.
    pub async fn for_service_url(service_url: &str) -> Result<FaultProxy> {
        let hostport = service_url
            .strip_prefix("pulsar://")
            .ok_or_else(|| anyhow::anyhow!("{service_url}: not a pulsar:// URL"))?;
        Self::start(hostport.trim_end_matches('/')).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The service URL through the proxy.
    pub fn service_url(&self) -> String {
        format!("pulsar://{}", self.addr)
    }

    /// Applies `fault` to the open connections `which` selects now; returns how many it hit.
    pub fn inject(&self, fault: Fault, which: Select) -> usize {
        let conns: Vec<Arc<Conn>> = self.shared.conns.lock().unwrap().clone();
        let mut hit = 0;
        for c in conns {
            if !c.open.load(Ordering::Relaxed) {
                continue;
            }
            if let Select::Carrying(t) = which
                && !c.commands.lock().unwrap().contains(&(t as i32))
            {
                continue;
            }
            let live = c.last_traffic.lock().unwrap().elapsed() < Duration::from_secs(1);
            apply(&self.shared, &c, fault, live);
            hit += 1;
        }
        hit
    }

    /// Applies `fault` to the connection that carries the client's next command of kind `on`, before
    /// forwarding it or after.
    pub fn arm(&self, on: Type, fault: Fault, after_forwarding: bool) {
        self.shared.armed.lock().unwrap().push(Armed {
            on,
            fault,
            after_forwarding,
        });
    }

    /// Loses the next frame of kind `on` on its way to a client, the connection kept: e.g. a `MESSAGE`
    /// the broker counts as delivered to a consumer that never gets it (what a consumer cut from the
    /// broker at a Failover hand-over leaves behind, without the cut: a hole in the subscription that
    /// only a redelivery fills). Counted as a fault on live traffic.
    pub fn lose(&self, on: Type) {
        self.shared.lose.lock().unwrap().push(on);
    }

    /// How many armed faults and losses are still waiting for their command.
    pub fn armed(&self) -> usize {
        self.shared.armed.lock().unwrap().len() + self.shared.lose.lock().unwrap().len()
    }

    /// How many open connections had traffic in the last second.
    pub fn live_connections(&self) -> usize {
        self.shared
            .conns
            .lock()
            .unwrap()
            .iter()
            .filter(|c| {
                c.open.load(Ordering::Relaxed)
                    && c.last_traffic.lock().unwrap().elapsed() < Duration::from_secs(1)
            })
            .count()
    }

    /// Caps every connection at `bytes_per_second` each way (`None`: no cap).
    pub fn set_bandwidth(&self, bytes_per_second: Option<u64>) {
        self.shared
            .bandwidth
            .store(bytes_per_second.unwrap_or(0), Ordering::Relaxed);
    }

    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            connections: s.connections.load(Ordering::Relaxed),
            bytes_to_broker: s.to_broker.load(Ordering::Relaxed),
            bytes_to_client: s.to_client.load(Ordering::Relaxed),
            faults: s.faults.load(Ordering::Relaxed),
            faults_on_live_traffic: s.faults_live.load(Ordering::Relaxed),
            sends: s.sends.load(Ordering::Relaxed),
        }
    }
}

/// Whether a frame of `kind` going to a client is the one a [`FaultProxy::lose`] waits for (counted).
fn lose_armed(shared: &Shared, kind: i32) -> bool {
    let mut lose = shared.lose.lock().unwrap();
    let Some(i) = lose.iter().position(|t| *t as i32 == kind) else {
        return false;
    };
    lose.remove(i);
    shared.faults.fetch_add(1, Ordering::Relaxed);
    shared.faults_live.fetch_add(1, Ordering::Relaxed);
    true
}

fn apply(shared: &Shared, conn: &Conn, fault: Fault, live: bool) {
    shared.faults.fetch_add(1, Ordering::Relaxed);
    if live {
        shared.faults_live.fetch_add(1, Ordering::Relaxed);
    }
    conn.state.send_replace(match fault {
        Fault::Reset => State::Reset,
        Fault::Stall(d) => State::StallUntil(Instant::now() + d),
        Fault::Blackhole => State::Blackhole,
        Fault::HalfClose => State::HalfClosed,
    });
}

fn serve(shared: Arc<Shared>, client: TcpStream, broker: TcpStream) {
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    let (state, _) = watch::channel(State::Forward);
    let conn = Arc::new(Conn {
        state,
        commands: Mutex::default(),
        last_traffic: Mutex::new(Instant::now()),
        open: std::sync::atomic::AtomicBool::new(true),
    });
    shared.conns.lock().unwrap().push(conn.clone());
    let (client_r, client_w) = client.into_split();
    let (broker_r, broker_w) = broker.into_split();
    let up = tokio::spawn(pump(shared.clone(), conn.clone(), client_r, broker_w, true));
    let down = tokio::spawn(pump(
        shared.clone(),
        conn.clone(),
        broker_r,
        client_w,
        false,
    ));
    tokio::spawn(async move {
        let _ = tokio::join!(up, down);
        conn.open.store(false, Ordering::Relaxed);
        shared
            .conns
            .lock()
            .unwrap()
            .retain(|c| !Arc::ptr_eq(c, &conn));
    });
}

/// Forwards one direction until either side closes or a fault ends it.
async fn pump(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    to_broker: bool,
) {
    let mut state = conn.state.subscribe();
    let mut buf = vec![0u8; 64 * 1024];
    let mut frames = Frames::default();
    loop {
        let now = *state.borrow_and_update();
        match now {
            State::Reset => {
                reset(to);
                return;
            }
            State::StallUntil(until) => {
                // Nothing read, so nothing forwarded: the sender's socket buffers fill, as on a stalled link.
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {
                        conn.state.send_if_modified(|s| {
                            let stalled = *s == State::StallUntil(until);
                            if stalled {
                                *s = State::Forward;
                            }
                            stalled
                        });
                    }
                    _ = state.changed() => {}
                }
                continue;
            }
            State::HalfClosed if !to_broker => {
                let _ = to.shutdown().await;
                // The broker's bytes go nowhere now, until it closes (after the client did) or a reset.
                loop {
                    tokio::select! {
                        r = from.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) {
                            return;
                        },
                        _ = state.changed() => if *state.borrow() == State::Reset {
                            reset(to);
                            return;
                        },
                    }
                }
            }
            _ => {}
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => n,
            },
            _ = state.changed() => continue,
        };
        if *state.borrow() == State::Blackhole {
            continue;
        }
        *conn.last_traffic.lock().unwrap() = Instant::now();
        let data = &buf[..n];
        if to_broker {
            let mut after = None;
            let kinds = frames.feed(data, None, &mut |_| false);
            let sends = kinds.iter().filter(|k| **k == Type::Send as i32).count() as u64;
            for kind in kinds {
                conn.commands.lock().unwrap().insert(kind);
                let mut armed = shared.armed.lock().unwrap();
                if let Some(i) = armed.iter().position(|a| a.on as i32 == kind) {
                    let a = armed.remove(i);
                    if a.after_forwarding {
                        after = Some(a.fault);
                    } else {
                        drop(armed);
                        apply(&shared, &conn, a.fault, true);
                    }
                }
            }
            // A fault armed before forwarding: the command (and what came with it) never reaches the
            // broker, or reaches it after the stall.
            let now = *state.borrow();
            match now {
                State::Reset | State::Blackhole => continue,
                State::StallUntil(until) => tokio::time::sleep_until(until.into()).await,
                _ => {}
            }
            if forward(&shared, &mut to, data).await.is_err() {
                return;
            }
            shared.to_broker.fetch_add(n as u64, Ordering::Relaxed);
            shared.sends.fetch_add(sends, Ordering::Relaxed);
            if let Some(fault) = after {
                apply(&shared, &conn, fault, true);
            }
        } else {
            // Whole frames pass, but for one armed to be lost (see [`FaultProxy::lose`]) — on a Pulsar
            // connection (the client's first command read: a broker answers only after it); anything
            // else passes as it comes.
            let pulsar = !conn.commands.lock().unwrap().is_empty();
            let passed = if pulsar {
                let mut passed = Vec::with_capacity(n);
                frames.feed(data, Some(&mut passed), &mut |kind| {
                    lose_armed(&shared, kind)
                });
                std::borrow::Cow::Owned(passed)
            } else {
                std::borrow::Cow::Borrowed(data)
            };
            if forward(&shared, &mut to, &passed).await.is_err() {
                return;
            }
            shared.to_client.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

async fn forward(shared: &Shared, to: &mut OwnedWriteHalf, data: &[u8]) -> std::io::Result<()> {
    let rate = shared.bandwidth.load(Ordering::Relaxed);
    if rate == 0 {
        return to.write_all(data).await;
    }
    // A cap: slices of a tenth of a second's worth, each after its share of time.
    let slice = (rate / 10).max(1) as usize;
    for chunk in data.chunks(slice) {
        let started = Instant::now();
        to.write_all(chunk).await?;
        let due = Duration::from_secs_f64(chunk.len() as f64 / rate as f64);
        if let Some(rest) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    Ok(())
}

/// A TCP reset: linger 0, and no FIN on the way out (the socket closes, with the reset, when the
/// other pump drops the read half).
fn reset(to: OwnedWriteHalf) {
    #[allow(deprecated)] // SO_LINGER 0 closes at once with a reset: no blocking close
    let _ = to.as_ref().set_linger(Some(Duration::ZERO));
    to.forget();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server; returns its address.
    async fn echo() -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(
        s: &mut TcpStream,
        msg: &[u8],
        within: Duration,
    ) -> std::io::Result<Vec<u8>> {
        s.write_all(msg).await?;
        let mut got = vec![0u8; msg.len()];
        match tokio::time::timeout(within, s.read_exact(&mut got)).await {
            Ok(r) => r.map(|_| got),
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }

    #[tokio::test]
    async fn forwards_and_counts() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let got = roundtrip(&mut s, b"hello", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"hello");
        let st = proxy.stats();
        assert_eq!(
            (st.connections, st.bytes_to_broker, st.bytes_to_client),
            (1, 5, 5)
        );
    }

    #[tokio::test]
    async fn a_reset_reaches_the_client_as_an_error() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        roundtrip(&mut s, b"x", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(proxy.inject(Fault::Reset, Select::All), 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut buf = [0u8; 1];
        let r = s.read(&mut buf).await;
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
        assert_eq!(proxy.stats().faults_on_live_traffic, 1);
    }

    #[tokio::test]
    async fn a_stall_holds_everything_then_delivers_it() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        roundtrip(&mut s, b"a", Duration::from_secs(5))
            .await
            .unwrap();
        proxy.inject(Fault::Stall(Duration::from_millis(1500)), Select::All);
        let started = Instant::now();
        let got = roundtrip(&mut s, b"held", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, b"held");
        assert!(
            started.elapsed() >= Duration::from_millis(1400),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_blackhole_forwards_nothing_and_keeps_the_connection() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        roundtrip(&mut s, b"a", Duration::from_secs(5))
            .await
            .unwrap();
        proxy.inject(Fault::Blackhole, Select::All);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = roundtrip(&mut s, b"lost", Duration::from_secs(1)).await;
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(proxy.stats().bytes_to_broker, 1);
    }

    #[tokio::test]
    async fn a_half_close_gives_the_client_eof() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        roundtrip(&mut s, b"a", Duration::from_secs(5))
            .await
            .unwrap();
        proxy.inject(Fault::HalfClose, Select::All);
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 0);
    }

    #[tokio::test]
    async fn a_bandwidth_cap_slows_the_link() {
        let proxy = FaultProxy::start(&echo().await).await.unwrap();
        proxy.set_bandwidth(Some(100_000));
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let started = Instant::now();
        let got = roundtrip(&mut s, &vec![7u8; 50_000], Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(got.len(), 50_000);
        assert_eq!(proxy.live_connections(), 1);
        // 50 kB at 100 kB/s: half a second (the echo comes back in step, capped the same).
        assert!(
            started.elapsed() >= Duration::from_millis(450),
            "{:?}",
            started.elapsed()
        );
    }
}
