//! Live progress: an indicatif line on a terminal; without one (CI, pipes),
//! a plain line on stderr every few seconds. Phase lines always go out.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::fleet::Sample;

/// Plain-mode lines are at most this frequent.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    bar: Option<ProgressBar>,
    last_plain: Option<Instant>,
    pub target: u64,
}

impl Progress {
    pub fn new(target: u64, quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(target);
            b.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} sessions  {msg}")
                    .expect("static template is valid")
                    .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress { bar, last_plain: None, target }
    }

    pub fn update(&mut self, s: &Sample) {
        let lat = match (s.e2e_p50_ms, s.e2e_p99_ms) {
            (Some(a), Some(b)) => format!("e2e p50 {a:.1} ms p99 {b:.1} ms"),
            _ => "e2e -".to_owned(),
        };
        let msg = format!("{:.0} msg/s  {:.0} deliveries/s  {lat}  errors {}", s.msgs_per_s, s.deliveries_per_s, s.errors);
        match &self.bar {
            Some(b) => {
                b.set_position(s.ready);
                b.set_message(msg);
            }
            None => {
                if self.last_plain.is_none_or(|t| t.elapsed() >= PLAIN_EVERY) {
                    self.last_plain = Some(Instant::now());
                    eprintln!("[{:6.1}s] sessions {}/{}  {msg}", s.t_s, s.ready, self.target);
                }
            }
        }
    }

    /// A phase or warning line that stays visible.
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(format!("throng-bench: {text}")),
            None => eprintln!("throng-bench: {text}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
