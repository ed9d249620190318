use super::*;
use crate::connector_api::settings;
use crate::sql::Pos;

fn strategy(sets: &[(&str, &str)]) -> RestartStrategy {
    let sets: Vec<_> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string(), Pos::default()))
        .collect();
    settings::resolve(&sets).expect("valid settings").0.restart
}

fn delay(d: Decision) -> Duration {
    match d {
        Decision::Restart { delay, .. } => delay,
        Decision::Fail { why } => panic!("expected a restart, got: {why}"),
    }
}

fn fails(d: Decision) -> String {
    match d {
        Decision::Fail { why } => why,
        Decision::Restart { of, .. } => panic!("expected the job to fail, got a restart ({of})"),
    }
}

#[test]
fn unset_restarts_rewinds_without_limit_and_nothing_else() {
    let s = strategy(&[]);
    assert_eq!(s, RestartStrategy::RewindsOnly);
    let mut h = RestartHistory::default();
    for i in 0..100 {
        assert_eq!(
            delay(s.decide(&mut h, i * 10, true, 0.5)),
            Duration::from_secs(1)
        );
    }
    assert_eq!(h.restarts, 100);
    assert!(fails(s.decide(&mut h, 5000, false, 0.5)).contains("no restart strategy is set"));
}

#[test]
fn disable_and_its_spellings_end_every_failure_a_rewind_too() {
    for v in ["disable", "none", "off", "NONE"] {
        let s = strategy(&[("restart-strategy.type", v)]);
        assert_eq!(s, RestartStrategy::Disable, "{v}");
        assert!(fails(s.decide(&mut RestartHistory::default(), 0, true, 0.5)).contains("disable"));
    }
}

#[test]
fn fixed_delay_allows_its_attempts_then_fails_with_flinks_defaults() {
    // Flink's defaults: 1 attempt, 1 s; the deprecated key `restart-strategy` is read too.
    let s = strategy(&[("restart-strategy", "fixeddelay")]);
    assert_eq!(
        s,
        RestartStrategy::FixedDelay {
            attempts: 1,
            delay: Duration::from_secs(1)
        }
    );
    let s = strategy(&[
        ("restart-strategy.type", "fixed-delay"),
        ("restart-strategy.fixed-delay.attempts", "3"),
        ("restart-strategy.fixed-delay.delay", "250 ms"),
    ]);
    let mut h = RestartHistory::default();
    for i in 0..3 {
        // Rewinds count as failures once a strategy is set.
        assert_eq!(
            delay(s.decide(&mut h, i * 1000, i % 2 == 0, 0.5)),
            Duration::from_millis(250)
        );
    }
    let why = fails(s.decide(&mut h, 10_000, true, 0.5));
    assert!(why.contains("all 3 restart attempt(s) used"), "{why}");
    assert!(
        why.contains("restart-strategy.fixed-delay.attempts"),
        "{why}"
    );
    assert_eq!(h.restarts, 3);
}

#[test]
fn failure_rate_counts_failures_within_the_interval() {
    let s = strategy(&[
        ("restart-strategy.type", "failure-rate"),
        (
            "restart-strategy.failure-rate.max-failures-per-interval",
            "2",
        ),
        (
            "restart-strategy.failure-rate.failure-rate-interval",
            "10 s",
        ),
        ("restart-strategy.failure-rate.delay", "0 ms"),
    ]);
    let mut h = RestartHistory::default();
    assert_eq!(delay(s.decide(&mut h, 0, false, 0.5)), Duration::ZERO);
    assert_eq!(delay(s.decide(&mut h, 4_000, false, 0.5)), Duration::ZERO);
    // A third failure 12 s after the first: the first has left the window.
    assert_eq!(delay(s.decide(&mut h, 12_000, false, 0.5)), Duration::ZERO);
    // A fourth 1 s later: 4 s, 12 s and 13 s are 3 within 10 s.
    let why = fails(s.decide(&mut h, 13_000, false, 0.5));
    assert!(why.contains("3 failures within 10s"), "{why}");
    // Defaults: 1 per minute.
    let s = strategy(&[("restart-strategy.type", "failurerate")]);
    let mut h = RestartHistory::default();
    assert_eq!(
        delay(s.decide(&mut h, 0, false, 0.5)),
        Duration::from_secs(1)
    );
    fails(s.decide(&mut h, 30_000, false, 0.5));
}

#[test]
fn exponential_delay_grows_caps_jitters_and_resets_after_running_well() {
    let s = strategy(&[
        ("restart-strategy.type", "exponential-delay"),
        ("restart-strategy.exponential-delay.initial-backoff", "1 s"),
        ("restart-strategy.exponential-delay.max-backoff", "5 s"),
        (
            "restart-strategy.exponential-delay.backoff-multiplier",
            "2.0",
        ),
        (
            "restart-strategy.exponential-delay.reset-backoff-threshold",
            "1 min",
        ),
        ("restart-strategy.exponential-delay.jitter-factor", "0"),
    ]);
    let mut h = RestartHistory::default();
    let mut now = 0;
    let mut delays = Vec::new();
    for _ in 0..5 {
        let d = delay(s.decide(&mut h, now, false, 0.9));
        delays.push(d.as_millis());
        now += d.as_millis() as u64 + 100;
    }
    assert_eq!(delays, [1000, 2000, 4000, 5000, 5000]);
    // The job then runs well for more than the threshold: back to the initial backoff.
    now += 61_000;
    assert_eq!(
        delay(s.decide(&mut h, now, false, 0.9)),
        Duration::from_secs(1)
    );
    assert_eq!(h.attempts, 1);

    // Jitter: ± factor × backoff, drawn from `random`.
    let s = strategy(&[("restart-strategy.type", "exponentialdelay")]);
    let lo = delay(s.decide(&mut RestartHistory::default(), 0, false, 0.0));
    let hi = delay(s.decide(&mut RestartHistory::default(), 0, false, 0.999_999));
    assert_eq!(lo, Duration::from_millis(900));
    assert!(
        hi >= Duration::from_millis(1099) && hi <= Duration::from_millis(1100),
        "{hi:?}"
    );
}

#[test]
fn exponential_delay_attempts_before_reset_ends_the_job() {
    let s = strategy(&[
        ("restart-strategy.type", "exponential-delay"),
        (
            "restart-strategy.exponential-delay.attempts-before-reset-backoff",
            "2",
        ),
        ("restart-strategy.exponential-delay.jitter-factor", "0"),
    ]);
    let mut h = RestartHistory::default();
    delay(s.decide(&mut h, 0, false, 0.5));
    delay(s.decide(&mut h, 2_000, false, 0.5));
    let why = fails(s.decide(&mut h, 5_000, false, 0.5));
    assert!(why.contains("2 restart attempt(s)"), "{why}");
}

#[test]
fn the_history_survives_the_environment_round_trip() {
    let s = strategy(&[
        ("restart-strategy.type", "failure-rate"),
        (
            "restart-strategy.failure-rate.max-failures-per-interval",
            "5",
        ),
    ]);
    let mut h = RestartHistory::default();
    for t in [10, 20, 30] {
        delay(s.decide(&mut h, t, false, 0.5));
    }
    h.last_cause = Some("a cause with \"quotes\" and\nlines".into());
    let back: RestartHistory = serde_json::from_str(&h.to_env()).unwrap();
    assert_eq!(back, h);
}

#[test]
fn invalid_values_are_refused_with_the_key_and_the_allowed_ones() {
    let bad = |k: &str, v: &str| {
        let sets = vec![(k.to_string(), v.to_string(), Pos::default())];
        settings::resolve(&sets).expect_err("invalid").to_string()
    };
    let e = bad("restart-strategy.type", "sometimes");
    assert!(
        e.contains("restart-strategy.type") && e.contains("fixed-delay"),
        "{e}"
    );
    let e = bad("restart-strategy.fixed-delay.attempts", "0");
    assert!(e.contains("restart-strategy.fixed-delay.attempts"), "{e}");
    let e = bad("restart-strategy.exponential-delay.jitter-factor", "2");
    assert!(e.contains("jitter-factor"), "{e}");
    let e = bad("restart-strategy.failure-rate.delay", "soon");
    assert!(e.contains("failure-rate.delay"), "{e}");
}

#[test]
fn a_long_cause_is_cut_at_a_character_boundary_so_the_history_stays_one_short_variable() {
    let mut h = RestartHistory::default();
    h.set_cause(&"é".repeat(MAX_CAUSE_BYTES));
    let kept = h.last_cause.clone().unwrap();
    assert!(
        kept.len() <= MAX_CAUSE_BYTES + " …".len() && kept.ends_with(" …"),
        "{}",
        kept.len()
    );
    h.set_cause("short");
    assert_eq!(h.last_cause.as_deref(), Some("short"));
}
