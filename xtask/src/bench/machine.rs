//! What the machine was doing during a bench run: its load average and the CPU time the hypervisor
//! gave to other guests (steal), so a recorded run says how shared the machine was.

use std::fs;

/// The 1-minute load average, to say whether the machine was busy.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The machine's CPU time so far as `/proc/stat` counts it (ticks): all of it, and the part the
/// hypervisor ran other guests on our cores (steal).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTicks {
    pub total: u64,
    pub steal: u64,
}

impl CpuTicks {
    pub fn now() -> Self {
        fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| Self::parse(&s))
            .unwrap_or_default()
    }

    /// The aggregate `cpu` line: user nice system idle iowait irq softirq steal [guest guest_nice]
    /// (guest time is already counted in user).
    pub fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        (v.len() == 8).then(|| Self {
            total: v.iter().sum(),
            steal: v[7],
        })
    }

    /// The share of the machine's CPU time since `before` that the hypervisor gave to others, as
    /// "N %" ("?" without `/proc/stat`).
    pub fn steal_since(self, before: Self) -> String {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            return "?".into();
        }
        let steal = self.steal.saturating_sub(before.steal);
        format!("{:.0} %", steal as f64 * 100.0 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::CpuTicks;

    #[test]
    fn steal_is_the_share_of_all_cpu_time() {
        let before =
            CpuTicks::parse("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 17 0 0\n")
                .unwrap();
        assert_eq!(
            before,
            CpuTicks {
                total: 1000,
                steal: 35
            }
        );
        let after = CpuTicks::parse("cpu  200 0 100 1400 10 0 5 285 7 0\n").unwrap();
        assert_eq!(after.steal_since(before), "25 %");
        assert_eq!(before.steal_since(before), "?");
        assert_eq!(CpuTicks::parse("cpu0 1 2 3\n"), None);
        assert_eq!(CpuTicks::parse("cpu  1 2 x 4 5 6 7 8\n"), None);
    }
}
