//! Real Kafka peers for the compatibility tests: the Apache Kafka Java client and
//! franz-go scenario programs of `tests/kafka-clients/`, and Apache Kafka's own CLI
//! tools, built or fetched once per machine (Maven and Go caches under ~/.cache/es)
//! and run with a bound on time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The pinned Kafka release of the Java client and the CLI tools.
pub const KAFKA_VERSION: &str = "4.4.0";

/// `tests/kafka-clients/`.
pub fn clients_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("kafka-clients")
}

/// `~/.cache/es`, where downloads outlive a checkout.
pub fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    Path::new(&home).join(".cache/es")
}

/// Runs `cmd` with `stdin` to completion within `limit`: its stdout, or a panic that
/// shows its stderr.
pub fn run(cmd: &mut Command, stdin: Option<&[u8]>, limit: Duration, what: &str) -> String {
    let out = output(cmd, stdin, limit, what);
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Runs `cmd` with `stdin` to completion within `limit`, whatever its exit status.
/// Its output is read as it comes, so a chatty child never blocks on a full pipe;
/// past `limit` it is killed and the test fails showing its stderr.
pub fn output(cmd: &mut Command, stdin: Option<&[u8]>, limit: Duration, what: &str) -> Output {
    let (out, finished) = output_within(cmd, stdin, limit, what);
    if !finished {
        panic!("{what}: no answer within {limit:?}; stderr: {}", String::from_utf8_lossy(&out.stderr));
    }
    out
}

/// Like [`output`], but a child still running at `limit` is killed and what it
/// printed is returned, with `false`: for clients that retry forever when refused.
pub fn output_within(cmd: &mut Command, stdin: Option<&[u8]>, limit: Duration, what: &str) -> (Output, bool) {
    let mut child = cmd
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start ({e}); see tests/kafka-clients/README.md"));
    let writer = stdin.map(|input| {
        let (mut pipe, input) = (child.stdin.take().expect("piped stdin"), input.to_vec());
        // Dropped when written: the child sees end of input.
        std::thread::spawn(move || {
            let _closed_early = pipe.write_all(&input);
        })
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + limit;
    let (status, finished) = loop {
        if let Some(status) = child.try_wait().expect("waiting on a child") {
            break (status, true);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break (child.wait().expect("waiting on a killed child"), false);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let out = Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    (out, finished)
}

/// A directory of this test process's own for built programs.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("es-kafka-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

fn maven(dir: &Path, goals: &[&str], what: &str) {
    let repo = format!("-Dmaven.repo.local={}", cache_dir().join("m2").display());
    run(
        Command::new("mvn").current_dir(dir).args(["-q", "-B", &repo]).args(goals),
        None,
        Duration::from_secs(900),
        what,
    );
}

/// The Java scenarios' classpath, compiled once per test binary (Maven resolves
/// kafka-clients on a machine's first run).
pub fn java_classpath() -> &'static str {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let dir = clients_dir().join("java");
        let out = scratch().join("java-classpath.txt");
        let goal = format!("-Dmdep.outputFile={}", out.display());
        maven(
            &dir,
            &["compile", "dependency:build-classpath", &goal],
            "mvn compile (tests/kafka-clients/java)",
        );
        let deps = std::fs::read_to_string(&out).expect("the classpath Maven wrote");
        format!("{}:{}", dir.join("target/classes").display(), deps.trim())
    })
}

/// The franz-go scenarios, built once per test binary.
pub fn go_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = scratch().join("franz-go-scenarios");
        let go = cache_dir().join("go");
        run(
            Command::new("go")
                .current_dir(clients_dir().join("go"))
                .env("GOMODCACHE", go.join("mod"))
                .env("GOCACHE", go.join("build"))
                .env("GOFLAGS", "-mod=mod")
                .args(["build", "-o"])
                .arg(&bin)
                .arg("."),
            None,
            Duration::from_secs(900),
            "go build (tests/kafka-clients/go)",
        );
        bin
    })
}

/// The jars of Apache Kafka's CLI tools (`tests/kafka-clients/tools/pom.xml`), fetched
/// once per machine.
pub fn kafka_tools_libs() -> &'static Path {
    static LIBS: OnceLock<PathBuf> = OnceLock::new();
    LIBS.get_or_init(|| {
        let libs = cache_dir().join(format!("kafka-tools-{KAFKA_VERSION}-libs"));
        if !libs.join(format!("kafka-tools-{KAFKA_VERSION}.jar")).exists() {
            let goal = format!("-DoutputDirectory={}", libs.display());
            let dir = clients_dir().join("tools");
            maven(&dir, &["dependency:copy-dependencies", &goal], "mvn (tests/kafka-clients/tools)");
        }
        libs
    })
}

/// Runs one of Kafka's CLI tools (`class`, e.g. `org.apache.kafka.tools.TopicCommand`,
/// what `kafka-topics.sh` runs) with `args` and optional stdin; its stdout.
pub fn kafka_tool(class: &str, args: &[&str], stdin: Option<&[u8]>) -> String {
    let cp = format!("{}/*", kafka_tools_libs().display());
    run(
        Command::new("java").args(["-Xmx256m", "-cp", &cp, class]).args(args),
        stdin,
        Duration::from_secs(120),
        &format!("{class} {args:?}"),
    )
}

/// What Apache Kafka observed for the scenario document `file`
/// (`tests/kafka-clients/observed/FILE.json`, e.g. `kafka-4.4.0-java-group`).
pub fn kafka_reference(file: &str) -> serde_json::Value {
    let path = clients_dir().join("observed").join(format!("{file}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// For the ignored `capture_*` tests that record the reference: the address of the
/// Apache Kafka broker to capture from (`ES_REFERENCE_KAFKA`) and a stamp (unix
/// milliseconds) that makes this capture's topic and group names fresh there.
pub fn reference_capture() -> (String, u128) {
    let addr = std::env::var("ES_REFERENCE_KAFKA").expect("ES_REFERENCE_KAFKA=host:port of Apache Kafka");
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    (addr, stamp)
}

/// Every field a client observed on es equals what it observed on Apache Kafka,
/// and neither side has a field the other lacks.
pub fn assert_same_as_kafka(client: &str, observed: &serde_json::Value, kafka: &serde_json::Value) {
    let (Some(es), Some(reference)) = (observed.as_object(), kafka.as_object()) else {
        panic!("{client}: not JSON objects: {observed} / {kafka}");
    };
    let mut diffs = Vec::new();
    for (field, want) in reference {
        match es.get(field) {
            Some(got) if got == want => {}
            got => diffs.push(format!("{field}: es {got:?}, Apache Kafka {want}")),
        }
    }
    for field in es.keys().filter(|f| !reference.contains_key(*f)) {
        diffs.push(format!("{field}: only es reported it: {}", es[field]));
    }
    assert!(diffs.is_empty(), "{client} observed es differ from Apache Kafka:\n  {}", diffs.join("\n  "));
}

/// kcat, as Debian ships it (on the system's librdkafka, with SSL and SASL). Without
/// `LD_LIBRARY_PATH`: cargo points it at build-script outputs for test runs, and
/// rdkafka-sys's holds the vendored librdkafka it built without SSL or SCRAM, which
/// kcat would load instead.
pub fn kcat() -> Command {
    let mut cmd = Command::new("kcat");
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd
}
