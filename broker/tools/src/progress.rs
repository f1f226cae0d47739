//! Progress bars (bytes, rate, ETA) on a terminal, nothing otherwise, so logs and
//! tests see only the result lines.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A byte counter shown as a bar when stderr is a terminal.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar of `total` bytes labelled `what`, hidden unless stderr is a terminal.
    pub fn bytes(what: &str, total: u64) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::hidden();
        }
        let bar = ProgressBar::new(total);
        let template = "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        Progress { bar }
    }

    /// Counts without drawing (tests, pipes, `--quiet`).
    pub fn hidden() -> Progress {
        Progress { bar: ProgressBar::hidden() }
    }

    pub fn add(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
