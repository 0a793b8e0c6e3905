//! What a process costs while it is measured, read from Linux's `/proc`: CPU time
//! (`utime + stime` of `/proc/PID/stat`, in clock ticks of `sysconf(_SC_CLK_TCK)`, so at 10 ms
//! resolution on most systems) over a window, and resident memory (`VmRSS` of
//! `/proc/PID/status`) at its start, end and sampled peak. The bench watches its own CPU too,
//! and the whole machine's busy time (`/proc/stat`), so a run disturbed by other work shows it.

use std::{sync::OnceLock, time::Duration};

use tokio::{sync::oneshot, task::JoinHandle, time::Instant};

use super::BenchError;

/// How often RSS is sampled for its peak.
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// A process's figures over one measured window.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcFigures {
    pub cpu: Duration,
    pub rss_start_kib: u64,
    pub rss_end_kib: u64,
    pub rss_peak_kib: u64,
}

/// The window's figures: the watched process's (if any), the bench's own CPU, and the CPU
/// time all processes used (None where `/proc/stat` cannot be read).
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    pub target: Option<ProcFigures>,
    pub bench_cpu: Duration,
    pub machine_busy: Option<Duration>,
}

/// CPU time used so far by `pid` (None: this process).
pub fn cpu_time(pid: Option<u32>) -> std::io::Result<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let text = std::fs::read_to_string(path)?;
    let ticks =
        parse_cpu_ticks(&text).ok_or_else(|| invalid("unexpected /proc/PID/stat format"))?;
    Ok(Duration::from_secs_f64(
        ticks as f64 / clock_ticks_per_second() as f64,
    ))
}

/// The resident set size of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> std::io::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_vm_rss(&text).ok_or_else(|| invalid("no VmRSS in /proc/PID/status"))
}

/// CPU time all CPUs spent busy so far (everything but idle and iowait).
pub fn machine_busy() -> std::io::Result<Duration> {
    let text = std::fs::read_to_string("/proc/stat")?;
    let ticks = parse_busy_ticks(&text).ok_or_else(|| invalid("unexpected /proc/stat format"))?;
    Ok(Duration::from_secs_f64(
        ticks as f64 / clock_ticks_per_second() as f64,
    ))
}

/// Busy ticks from the `cpu` line of `/proc/stat`: user, nice, system, irq, softirq and
/// steal (guest time is already inside user and nice).
fn parse_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    Some(field(0) + field(1) + field(2) + field(5) + field(6) + field(7))
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// `utime + stime` from a `/proc/PID/stat` line. The command name (field 2) is in parentheses
/// and may hold spaces and parentheses itself, so fields are counted after the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Fields 3.. follow; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        // SAFETY: sysconf reads a configuration value and has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
    })
}

/// Checks that `pid` can be watched (its `/proc` files are readable).
pub fn check_pid(pid: u32) -> Result<(), BenchError> {
    cpu_time(Some(pid))
        .and_then(|_| rss_kib(pid))
        .map(|_| ())
        .map_err(|source| BenchError::Process { pid, source })
}

/// A watch over one window, started by `spawn_watch`.
pub struct Watch {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Window, BenchError>>,
}

/// Starts watching `pid` (and this process) from `start`, sampling RSS until `finish`.
pub fn spawn_watch(pid: Option<u32>, start: Instant) -> Watch {
    let (stop, mut stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        tokio::time::sleep_until(start).await;
        let failed = |pid: u32| move |source| BenchError::Process { pid, source };
        let bench_before = cpu_time(None).map_err(failed(std::process::id()))?;
        let machine_before = machine_busy().ok();
        let mut target = match pid {
            Some(pid) => {
                let rss = rss_kib(pid).map_err(failed(pid))?;
                let cpu = cpu_time(Some(pid)).map_err(failed(pid))?;
                Some((
                    pid,
                    cpu,
                    ProcFigures {
                        cpu: Duration::ZERO,
                        rss_start_kib: rss,
                        rss_end_kib: rss,
                        rss_peak_kib: rss,
                    },
                ))
            }
            None => None,
        };
        let mut tick = tokio::time::interval(RSS_SAMPLE_EVERY);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tick.tick() => {
                    if let Some((pid, _, figures)) = &mut target {
                        // A sample that fails (the process exiting) leaves the peak as it was;
                        // the end reading reports the failure.
                        if let Ok(rss) = rss_kib(*pid) {
                            figures.rss_peak_kib = figures.rss_peak_kib.max(rss);
                        }
                    }
                }
            }
        }
        let bench_cpu = cpu_time(None)
            .map_err(failed(std::process::id()))?
            .saturating_sub(bench_before);
        let target = match target {
            Some((pid, before, mut figures)) => {
                figures.cpu = cpu_time(Some(pid))
                    .map_err(failed(pid))?
                    .saturating_sub(before);
                figures.rss_end_kib = rss_kib(pid).map_err(failed(pid))?;
                figures.rss_peak_kib = figures.rss_peak_kib.max(figures.rss_end_kib);
                Some(figures)
            }
            None => None,
        };
        let machine_busy = machine_before
            .zip(machine_busy().ok())
            .map(|(before, after)| after.saturating_sub(before));
        Ok(Window {
            target,
            bench_cpu,
            machine_busy,
        })
    });
    Watch { stop, task }
}

impl Watch {
    /// Ends the window now and returns its figures.
    pub async fn finish(self) -> Result<Window, BenchError> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(window) => window,
            Err(join) => Err(BenchError::Process {
                pid: std::process::id(),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_the_command_name() {
        let stat =
            "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn busy_ticks_leave_out_idle_and_iowait() {
        let stat = "cpu  100 5 20 900 40 1 2 3 0 0\ncpu0 50 2 10 450 20 0 1 1 0 0\n";
        assert_eq!(parse_busy_ticks(stat), Some(131));
        assert!(machine_busy().unwrap() > Duration::ZERO);
    }

    #[test]
    fn vm_rss_is_read_in_kib() {
        let status = "Name:\tswitchyard\nVmPeak:\t  9000 kB\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss(status), Some(12345));
    }

    #[test]
    fn this_process_can_be_watched() {
        check_pid(std::process::id()).unwrap();
        assert!(rss_kib(std::process::id()).unwrap() > 0);
        assert!(clock_ticks_per_second() >= 100);
    }
}
