//! Runs a row's worker threads for a fixed time behind a progress bar. Workers and
//! the bar share a [`Control`]: a stop flag and a running byte count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use indicatif::{ProgressBar, ProgressStyle};

/// How often the bar redraws.
const TICK: Duration = Duration::from_millis(100);

/// What every worker of a timed row shares.
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    bytes: AtomicU64,
    /// Bytes after which the row stops before its time (bounds what a row writes).
    cap: Option<u64>,
}

impl Control {
    /// False once the time is up or a worker failed.
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    pub fn add_bytes(&self, n: usize) {
        let total = self.bytes.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if self.cap.is_some_and(|cap| total >= cap) {
            self.stop();
        }
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn mb_per_s(&self, elapsed: Duration) -> f64 {
        self.bytes() as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
    }
}

/// Each worker's result, in worker order, and the wall time from start until the
/// last worker returned (so it covers every operation the workers counted).
#[derive(Debug)]
pub struct Timed<T> {
    pub elapsed: Duration,
    pub results: Vec<T>,
    /// Throughput of each whole second of the row, to show bursts and stalls.
    pub mb_per_s_by_second: Vec<f64>,
}

/// Runs `work(i, control)` on `workers` threads until `duration` has passed; each
/// worker loops while `control.running()`. The first worker error stops the row.
pub fn run<T, F>(label: &str, duration: Duration, workers: usize, work: F) -> Result<Timed<T>>
where
    T: Send,
    F: Fn(usize, &Control) -> Result<T> + Sync,
{
    run_capped(label, duration, None, workers, work)
}

/// [`run`], stopping early once the workers counted `cap` bytes (the elapsed time
/// then ends there too, so the rates stay true).
pub fn run_capped<T, F>(
    label: &str,
    duration: Duration,
    cap: Option<u64>,
    workers: usize,
    work: F,
) -> Result<Timed<T>>
where
    T: Send,
    F: Fn(usize, &Control) -> Result<T> + Sync,
{
    let ctl = Control { cap, ..Control::default() };
    let start = Instant::now();
    let (results, by_second) = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let (ctl, work) = (&ctl, &work);
            let spawned = std::thread::Builder::new()
                .name(format!("es-bench-{i}"))
                .spawn_scoped(s, move || guarded(i, ctl, work));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    ctl.stop();
                    return Err(e).context("spawning a benchmark thread");
                }
            }
        }
        let by_second = show_progress(label, duration, start, &ctl);
        let results = handles.into_iter().map(join).collect::<Result<Vec<T>>>()?;
        Ok((results, by_second))
    })?;
    Ok(Timed { elapsed: start.elapsed(), results, mb_per_s_by_second: by_second })
}

/// Runs one worker; a failure stops the others.
fn guarded<T, F>(i: usize, ctl: &Control, work: &F) -> Result<T>
where
    F: Fn(usize, &Control) -> Result<T>,
{
    let result = work(i, ctl);
    if result.is_err() {
        ctl.stop();
    }
    result.with_context(|| format!("benchmark thread {i}"))
}

fn join<T>(handle: ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle.join().unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked")))
}

/// Draws the bar until the time is up (or a worker failed), then stops the workers.
/// Returns the MB/s of each whole second.
fn show_progress(label: &str, duration: Duration, start: Instant, ctl: &Control) -> Vec<f64> {
    let bar = ProgressBar::new(duration.as_millis() as u64);
    bar.set_style(style());
    bar.set_prefix(label.to_owned());
    let mut seconds = PerSecond::new(start);
    loop {
        let elapsed = start.elapsed();
        if !ctl.running() || elapsed >= duration {
            break;
        }
        seconds.sample(ctl);
        bar.set_position(elapsed.as_millis() as u64);
        bar.set_message(format!("{:8.1} MB/s", ctl.mb_per_s(elapsed)));
        std::thread::sleep((duration - elapsed).min(TICK));
    }
    ctl.stop();
    seconds.finish(ctl);
    bar.set_position(duration.as_millis() as u64);
    bar.finish_with_message(format!("{:8.1} MB/s", ctl.mb_per_s(start.elapsed())));
    seconds.samples
}

/// A spinner in the bars' layout, for an untimed step that may take a while
/// (uploading and compiling a plugin); `finish_with_message` when done.
pub fn spinner(label: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    let style = ProgressStyle::with_template("{prefix:<32} {spinner} {elapsed:>4} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_prefix(label.to_owned());
    bar.enable_steady_tick(TICK);
    bar
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:<32} [{bar:30}] {percent:>3}% {msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Turns the running byte count into one MB/s figure per elapsed second.
struct PerSecond {
    since: Instant,
    bytes: u64,
    samples: Vec<f64>,
}

impl PerSecond {
    fn new(start: Instant) -> Self {
        PerSecond { since: start, bytes: 0, samples: Vec::new() }
    }

    fn sample(&mut self, ctl: &Control) {
        if self.since.elapsed() >= Duration::from_secs(1) {
            self.push(ctl);
        }
    }

    /// Keeps the last, partial second if it is at least half a second long.
    fn finish(&mut self, ctl: &Control) {
        if self.since.elapsed() >= Duration::from_millis(500) {
            self.push(ctl);
        }
    }

    fn push(&mut self, ctl: &Control) {
        let span = self.since.elapsed();
        let now = ctl.bytes();
        let mb = (now - self.bytes) as f64 / 1e6;
        self.samples.push(mb / span.as_secs_f64());
        self.since = Instant::now();
        self.bytes = now;
    }
}
