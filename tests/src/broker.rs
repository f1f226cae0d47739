//! Helpers for black-box broker tests: start the real `es-broker` binary on
//! 127.0.0.1:0, find its port from its `listening on` line, talk to it over HTTP,
//! and stop it with SIGTERM or SIGKILL. Every wait here is bounded.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a broker may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Per-request timeout; long polls in tests stay well below it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The es-broker binary: `$ES_BROKER_BIN`, else `es-broker` in the target directory.
pub fn broker_bin() -> PathBuf {
    binary("es-broker", "ES_BROKER_BIN")
}

/// The es CLI binary: `$ES_BIN`, else `es` beside `$ES_BROKER_BIN`, else `es` in the
/// target directory.
pub fn es_bin() -> PathBuf {
    if std::env::var_os("ES_BIN").is_none()
        && let Some(broker) = std::env::var_os("ES_BROKER_BIN")
    {
        let sibling = PathBuf::from(broker).with_file_name("es");
        if sibling.exists() {
            return sibling;
        }
    }
    binary("es", "ES_BIN")
}

/// The es-tools binary: `$ES_TOOLS_BIN`, else `es-tools` beside `$ES_BROKER_BIN`, else
/// `es-tools` in the target directory.
pub fn tools_bin() -> PathBuf {
    if std::env::var_os("ES_TOOLS_BIN").is_none()
        && let Some(broker) = std::env::var_os("ES_BROKER_BIN")
    {
        let sibling = PathBuf::from(broker).with_file_name("es-tools");
        if sibling.exists() {
            return sibling;
        }
    }
    binary("es-tools", "ES_TOOLS_BIN")
}

/// Runs es-tools with `args` in `cwd` (stdin closed) and answers its output.
pub fn tools(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(tools_bin())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("running es-tools")
}

/// A finished process's stdout then stderr, for assertions and their messages.
pub fn output_text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// One compiled-plugin cache for every broker the tests start, beside the broker
/// binary (so inside this build's target directory): each guest is compiled
/// once per build instead of once per test. A test that needs a cold cache
/// passes its own `--plugin-cache-dir`, which wins over the variable.
pub fn shared_plugin_cache() -> PathBuf {
    broker_bin().with_file_name("es-test-plugin-cache")
}

/// Finds a workspace binary: the override variable, else the release directory
/// this test runs from (`<target>/release/deps/<test>` sits below it, wherever
/// `CARGO_TARGET_DIR` points), else `<workspace>/target/release`.
fn binary(name: &str, var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let beside_tests =
        std::env::current_exe().ok().and_then(|exe| exe.parent()?.parent().map(|release| release.join(name)));
    let in_workspace = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../target/release")
    .join(name);
    let candidates: Vec<PathBuf> = beside_tests.into_iter().chain([in_workspace]).collect();
    candidates.iter().find(|p| p.exists()).cloned().unwrap_or_else(|| {
        panic!(
            "{name} binary not found at {candidates:?}: run `cargo build --release --workspace` \
             before the tests, or point {var} at it"
        )
    })
}

/// An HTTP response: status and body (JSON, or the raw text as a JSON string).
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Resp {
    /// The error code of an error response, or "" if there is none.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The schema registry's `error_code` (Confluent's shape), or 0 if there is none.
    pub fn error_code(&self) -> u64 {
        self.body["error_code"].as_u64().unwrap_or(0)
    }
}

/// A running es-broker process; killed on drop if still running.
#[derive(Debug)]
pub struct Broker {
    child: Child,
    pub url: String,
    /// host:port of the binary-protocol listener.
    pub binary_addr: String,
    /// host:port of the Kafka listener.
    pub kafka_addr: String,
    pub data_dir: PathBuf,
    stderr: Arc<Mutex<String>>,
    /// The thread echoing stderr into the test's output.
    echo: Option<std::thread::JoinHandle<()>>,
    agent: ureq::Agent,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .build()
        .into()
}

/// Collects a child's stderr in the background, echoing it to the test's output.
/// Returns the text so far and the echoing thread (it ends when the child's stderr
/// closes).
fn collect(mut from: impl Read + Send + 'static) -> (Arc<Mutex<String>>, std::thread::JoinHandle<()>) {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let chunk = String::from_utf8_lossy(&buf[..n]).into_owned();
            eprint!("{chunk}");
            sink.lock().unwrap().push_str(&chunk);
        }
    });
    (text, echo)
}

thread_local! {
    /// The panic message of this thread's failing test, once it panicked.
    static FAILURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Notes each panic's message on its thread, then reports it as before. A failing
/// test's brokers keep logging until they are killed (their stderr is echoed into
/// the test's output), which buried the message in the middle of long output
/// (CI shows the start and the end): `Broker`'s drop repeats it last.
fn note_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let location = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(a non-string panic)".to_owned());
            FAILURE.with(|f| *f.borrow_mut() = Some(format!("{message}{location}")));
            report(info);
        }));
    });
}

impl Broker {
    /// Starts a broker on 127.0.0.1:0 with its data in `data_dir`.
    pub fn start(data_dir: &Path) -> Broker {
        Self::start_with(data_dir, &[])
    }

    /// Starts a broker with extra command-line arguments.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Broker {
        Self::start_env(data_dir, extra, &[])
    }

    /// Starts a broker with extra arguments and environment variables (e.g.
    /// `ES_AUTH_BOOTSTRAP_KEY`).
    pub fn start_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Broker {
        let mut cmd = Command::new(broker_bin());
        cmd.arg("--data-dir")
            .arg(data_dir)
            .env("ES_PLUGIN_CACHE_DIR", shared_plugin_cache())
            .envs(env.iter().copied())
            .args(["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"])
            .args(extra);
        Self::spawn(cmd, data_dir)
    }

    /// Starts `cmd` (an es-broker command line the caller built, e.g. from a config
    /// file) and waits for its listeners; `data_dir` is where the caller put the data.
    pub fn spawn(mut cmd: Command, data_dir: &Path) -> Broker {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning es-broker");
        note_panics();
        let (stderr, echo) = collect(child.stderr.take().expect("piped stderr"));
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        // The broker prints its binary and Kafka addresses, then its HTTP address.
        let (mut binary_addr, mut kafka_addr) = (String::new(), String::new());
        let url = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("listening on es://") {
                        // A TLS listener adds a note after its address: " (tls)".
                        binary_addr = addr.split_whitespace().next().unwrap_or_default().to_owned();
                    } else if let Some(addr) = line.strip_prefix("listening on kafka://") {
                        kafka_addr = addr.split_whitespace().next().unwrap_or_default().to_owned();
                    } else if let Some(url) = line.strip_prefix("listening on ") {
                        break url.split_whitespace().next().unwrap_or_default().to_owned();
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "es-broker did not print its address within {START_TIMEOUT:?}; stderr:\n{}",
                        stderr.lock().unwrap()
                    );
                }
            }
        };
        Broker {
            child,
            url,
            binary_addr,
            kafka_addr,
            data_dir: data_dir.to_owned(),
            stderr,
            echo: Some(echo),
            agent: agent(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the broker wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until stderr contains `needle` and returns all of stderr.
    /// Stderr is read by a background thread, so a line the broker printed before
    /// its `listening on` line may still be on its way.
    pub fn wait_for_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.stderr();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "es-broker never wrote {needle:?} to stderr; it wrote:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn get(&self, path: &str) -> Resp {
        request(&self.agent, "GET", &format!("{}{path}", self.url), None)
    }

    /// How many requests of Kafka API `api` (snake case, e.g. `offset_for_leader_epoch`)
    /// this broker answered, from its `/metrics` (auth off).
    pub fn kafka_answered(&self, api: &str) -> u64 {
        let text = self.get("/metrics").body.as_str().map(str::to_owned).unwrap_or_default();
        let series = format!("es_kafka_request_latency_seconds_count{{api=\"{api}\"}}");
        text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |v| v.trim().parse().unwrap_or(0))
    }

    pub fn delete(&self, path: &str) -> Resp {
        request(&self.agent, "DELETE", &format!("{}{path}", self.url), None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.post_raw(path, &body.to_string())
    }

    pub fn post_raw(&self, path: &str, body: &str) -> Resp {
        request(&self.agent, "POST", &format!("{}{path}", self.url), Some(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> Resp {
        request(&self.agent, "PUT", &format!("{}{path}", self.url), Some(&body.to_string()))
    }

    /// Any method with a raw body in a given content type (e.g. the schema
    /// registry's `application/vnd.schemaregistry.v1+json`).
    pub fn send(&self, method: &str, path: &str, body: &str, content_type: &str) -> Resp {
        let url = format!("{}{path}", self.url);
        try_send(&self.agent, method, &url, Some(body), content_type)
            .unwrap_or_else(|e| panic!("{method} {url} failed: {e}"))
    }

    pub fn patch(&self, path: &str, body: &Value) -> Resp {
        request(&self.agent, "PATCH", &format!("{}{path}", self.url), Some(&body.to_string()))
    }

    /// POSTs raw bytes (e.g. a plugin component).
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> Resp {
        let url = format!("{}{path}", self.url);
        let sent = self.agent.post(&url).header("content-type", "application/octet-stream").send(body);
        read_resp(sent).unwrap_or_else(|e| panic!("POST {url} failed: {e}"))
    }

    /// Creates a topic and asserts it worked.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let r = self.post("/topics", &serde_json::json!({"name": name, "partitions": partitions}));
        assert_eq!(r.status, 201, "creating topic {name}: {:?}", r.body);
    }

    /// Sends a signal by name (`TERM`, `INT`) with the `kill` command.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits (bounded) for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("polling es-broker") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "es-broker did not exit within {timeout:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, like `kill -9`: no flush, no cleanup.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill9();
        }
        if !std::thread::panicking() {
            return;
        }
        // The test failed: let the echo finish (bounded), then say why, last.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.echo.as_ref().is_some_and(|e| !e.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(failure) = FAILURE.with(|f| f.borrow().clone()) {
            eprintln!("\n---- the test failed (repeated after the broker's log): {failure}");
        }
    }
}

/// A one-shot client for a broker URL (e.g. from a producer thread), optionally
/// sending an API key as `Authorization: Bearer`.
#[derive(Debug, Clone)]
pub struct Client {
    pub url: String,
    agent: ureq::Agent,
    key: Option<String>,
}

impl Client {
    pub fn new(url: &str) -> Self {
        Self { url: url.to_owned(), agent: agent(), key: None }
    }

    /// A client that sends `key` with every request.
    pub fn with_key(url: &str, key: &str) -> Self {
        Self { url: url.to_owned(), agent: agent(), key: Some(key.to_owned()) }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.send("GET", path, "")
    }

    pub fn delete(&self, path: &str) -> Resp {
        self.send("DELETE", path, "")
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.send("POST", path, &body.to_string())
    }

    pub fn put(&self, path: &str, body: &Value) -> Resp {
        self.send("PUT", path, &body.to_string())
    }

    /// Any method, a JSON body, the key (if any) as a bearer token; the response
    /// headers come back too (`Retry-After`, `WWW-Authenticate`).
    pub fn send_full(&self, method: &str, path: &str, body: &str) -> (Resp, Vec<(String, String)>) {
        let url = format!("{}{path}", self.url);
        let mut req = ureq::http::Request::builder().method(method).uri(&url);
        req = req.header("content-type", "application/json");
        if let Some(key) = &self.key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        let sent = if body.is_empty() {
            self.agent.run(req.body(()).expect("a valid request"))
        } else {
            self.agent.run(req.body(body.to_owned()).expect("a valid request"))
        };
        let mut resp = sent.unwrap_or_else(|e| panic!("{method} {url} failed: {e}"));
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (Resp { status, body }, headers)
    }

    pub fn send(&self, method: &str, path: &str, body: &str) -> Resp {
        self.send_full(method, path, body).0
    }

    /// POSTs raw bytes (e.g. a plugin component) with the key, if any.
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> Resp {
        let url = format!("{}{path}", self.url);
        let mut req = self.agent.post(&url).header("content-type", "application/octet-stream");
        if let Some(key) = &self.key {
            req = req.header("authorization", format!("Bearer {key}"));
        }
        read_resp(req.send(body)).unwrap_or_else(|e| panic!("POST {url} failed: {e}"))
    }

    /// DELETEs; `None` when the broker could not be reached or the reply was cut.
    pub fn try_delete(&self, path: &str) -> Option<Resp> {
        try_request(&self.agent, "DELETE", &format!("{}{path}", self.url), None).ok()
    }

    /// POSTs JSON; `None` when the broker could not be reached or the reply was cut.
    pub fn try_post(&self, path: &str, body: &Value) -> Option<Resp> {
        try_request(&self.agent, "POST", &format!("{}{path}", self.url), Some(&body.to_string())).ok()
    }
}

fn request(agent: &ureq::Agent, method: &str, url: &str, body: Option<&str>) -> Resp {
    try_request(agent, method, url, body).unwrap_or_else(|e| panic!("{method} {url} failed: {e}"))
}

fn try_request(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    body: Option<&str>,
) -> Result<Resp, ureq::Error> {
    try_send(agent, method, url, body, "application/json")
}

fn try_send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    body: Option<&str>,
    content_type: &str,
) -> Result<Resp, ureq::Error> {
    let resp = match (method, body) {
        ("GET", _) => agent.get(url).call()?,
        ("DELETE", _) => agent.delete(url).call()?,
        ("POST", b) => agent.post(url).header("content-type", content_type).send(b.unwrap_or(""))?,
        ("PUT", b) => agent.put(url).header("content-type", content_type).send(b.unwrap_or(""))?,
        ("PATCH", b) => agent.patch(url).header("content-type", content_type).send(b.unwrap_or(""))?,
        (m, _) => panic!("unsupported method {m}"),
    };
    read_resp(Ok(resp))
}

fn read_resp(sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Resp, ureq::Error> {
    let mut resp = sent?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().with_config().limit(64 * 1024 * 1024).read_to_string()?;
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok(Resp { status, body })
}
