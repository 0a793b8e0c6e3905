//! The progress bar on stderr (indicatif): one bar per phase, advancing with time (or with the
//! request count of a counted run), showing requests, rate and failures. Hidden with --quiet or
//! when stderr is not a terminal, so pipes and tests see nothing of it.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::{task::JoinHandle, time::Instant};

const REDRAW_EVERY: Duration = Duration::from_millis(250);

/// The run's progress display.
pub struct Progress {
    enabled: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }

    /// A line of text above the bars (setup steps, resolved names), when shown at all.
    pub fn note(&self, text: &str) {
        if self.enabled {
            eprintln!("{text}");
        }
    }

    fn bar(&self, length: u64, prefix: String) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let style = ProgressStyle::with_template("{prefix:>16} [{bar:32}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.set_prefix(prefix);
        bar
    }

    /// Follows a phase measured from `start` for `duration` (or `requests`), reading
    /// `(answered, failed)` from `counts`; abort the returned task to end the bar.
    pub fn follow(
        &self,
        title: &str,
        start: Instant,
        duration: Duration,
        requests: Option<u64>,
        counts: impl Fn() -> (u64, u64) + Send + 'static,
    ) -> BarTask {
        let length = requests.unwrap_or(duration.as_millis() as u64);
        let bar = self.bar(length, title.to_owned());
        let shown = bar.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(REDRAW_EVERY);
            loop {
                tick.tick().await;
                let now = Instant::now();
                if now < start {
                    bar.set_message("warming up");
                    continue;
                }
                let (done, failed) = counts();
                let seconds = now.duration_since(start).as_secs_f64().max(1e-3);
                bar.set_position(match requests {
                    Some(_) => done,
                    None => now.duration_since(start).as_millis() as u64,
                });
                bar.set_message(format!(
                    "{done} requests, {:.0}/s, {failed} failed",
                    done as f64 / seconds
                ));
            }
        });
        BarTask { bar: shown, task }
    }

    /// A bar counting `total` steps of `what` (the soak's sessions).
    pub fn counter(&self, total: u64, what: &str) -> ProgressBar {
        let bar = self.bar(total, what.to_owned());
        bar.set_message(what.to_owned());
        bar
    }

    /// Names the phase about to run in the bars' prefix.
    pub fn phase_title(label: &str, round: u32, rounds: u32) -> String {
        if rounds > 1 {
            format!("{label} {round}/{rounds}")
        } else {
            label.to_owned()
        }
    }
}

/// A bar being redrawn by a task.
pub struct BarTask {
    pub bar: ProgressBar,
    task: JoinHandle<()>,
}

impl BarTask {
    /// Stops redrawing and clears the bar.
    pub fn abort(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}
