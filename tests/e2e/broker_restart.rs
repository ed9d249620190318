//! The tests that restart the shared local broker (same ports, same data) under a live client or job.
//! Their own test binary, so that no other test sees the outage: cargo runs test binaries one after
//! another, and the tests of this binary take [`one_restart_at_a_time`] so that they never overlap either.
//! They cannot run against an external cluster (`PULSAR_SERVICE_URL` unset).

use tokio::sync::{Mutex, MutexGuard};

mod exactly_once_broker_restart;
mod fresh_broker;
mod pulsar_broker_restart;
mod soak;

static RESTARTING: Mutex<()> = Mutex::const_new(());

/// Held for the whole of a test that restarts the broker: libtest runs the tests of a binary in parallel,
/// and a restart must not hit the other test's client or job. (An async lock: it is held across awaits, and
/// a test that fails releases it like one that passes.)
pub async fn one_restart_at_a_time() -> MutexGuard<'static, ()> {
    RESTARTING.lock().await
}
