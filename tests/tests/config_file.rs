//! es-broker's config file, environment mapping and doctor, black-box: the real
//! broker started from a TOML file on 127.0.0.1:0, ES_* overriding the file, bad
//! files refused with every setting named, `config init` output that validates,
//! docs/configuration.md matching `config reference`, and `doctor` on a healthy
//! data directory (exit 0), a corrupt segment (2, naming the file) and a data
//! directory that cannot be written (2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use es_tests::broker::{Broker, broker_bin, shared_plugin_cache};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

/// Runs es-broker with `args` and no inherited ES_* settings; bounded in time.
fn broker(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = clean(Command::new(broker_bin()));
    cmd.args(args).envs(env.iter().copied());
    es_tests::peers::output(&mut cmd, None, LIMIT, &format!("es-broker {args:?}"))
}

/// A command without the ES_* variables of the test's own environment, so only
/// what a test sets is read.
fn clean(mut cmd: Command) -> Command {
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("ES_")) {
        cmd.env_remove(name);
    }
    cmd
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A config file for a broker on free loopback ports with its data in `data`.
fn write_config(dir: &Path, data: &Path, extra: &str) -> PathBuf {
    let path = dir.join("es.toml");
    let body = format!(
        "[log]\ndata_dir = {:?}\n\n[http]\nbind = \"127.0.0.1:0\"\n\n[binary]\nbind = \"127.0.0.1:0\"\n\n\
         [kafka]\nbind = \"127.0.0.1:0\"\n\n[plugins]\ncache_dir = {:?}\n{extra}",
        data.display().to_string(),
        shared_plugin_cache().display().to_string(),
    );
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn the_broker_starts_from_a_config_file_and_the_environment_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let (from_file, from_env) = (dir.path().join("file-data"), dir.path().join("env-data"));
    let config = write_config(dir.path(), &from_file, "");

    let mut cmd = clean(Command::new(broker_bin()));
    cmd.arg("--config").arg(&config);
    let b = Broker::spawn(cmd, &from_file);
    b.create_topic("orders", 1);
    assert!(from_file.join("topics").exists(), "the file's data_dir is used");
    drop(b);

    // ES_CONFIG names the file; ES_LOG_DATA_DIR wins over its data_dir.
    let mut cmd = clean(Command::new(broker_bin()));
    cmd.env("ES_CONFIG", &config).env("ES_LOG_DATA_DIR", &from_env);
    let b = Broker::spawn(cmd, &from_env);
    let topics = b.get("/topics");
    assert_eq!(topics.body["topics"], json!([]), "a fresh directory: {:?}", topics.body);
    b.wait_for_stderr(&format!("from {}", from_env.display()));
    drop(b);

    let printed = broker(
        &["config", "print", "--config", config.to_str().unwrap(), "--bind-kafka", "127.0.0.1:0"],
        &[("ES_HTTP_MAX_IN_FLIGHT_REQUESTS", "7"), ("ES_AUTH_BOOTSTRAP_KEY", "es_not_to_be_printed")],
    );
    let out = text(&printed);
    assert!(printed.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "data_dir = {:?}   # file {}",
            from_file.display().to_string(),
            config.display()
        )),
        "{out}"
    );
    assert!(out.contains("max_in_flight_requests = 7   # env ES_HTTP_MAX_IN_FLIGHT_REQUESTS"), "{out}");
    assert!(out.contains("bind = \"127.0.0.1:0\"   # flag --bind-kafka"), "{out}");
    assert!(out.contains("housekeeping_interval_ms = 30000   # default"), "{out}");
    assert!(out.contains("bootstrap_key = \"<redacted>\"") && !out.contains("es_not_to_be_printed"), "{out}");
}

#[test]
fn a_bad_file_names_every_setting_and_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &dir.path().join("data"),
        "\n[journal]\nenabld = true\n\n[metric]\nenabled = true\n\n[auth]\nkafka_session_lifetime_ms = \"1h\"\n",
    );
    let config = config.to_str().unwrap();
    for args in [vec!["--config", config], vec!["config", "validate", "--config", config]] {
        let out = broker(&args, &[]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(all.contains("unknown setting `journal.enabld` (did you mean `journal.enabled`?)"), "{all}");
        assert!(all.contains("unknown section `metric` (did you mean `metrics`?)"), "{all}");
        assert!(all.contains("auth.kafka_session_lifetime_ms: \"1h\" is not an integer"), "{all}");
        assert!(all.contains("3 configuration error(s)"), "{all}");
    }
    // The environment goes through the same checks, and unsafe files are refused.
    let out = broker(&["config", "validate"], &[("ES_KAFKA_ADVERTISED_PORT", "0")]);
    assert!(
        text(&out).contains("ES_KAFKA_ADVERTISED_PORT: 0: must be between 1 and 65535"),
        "{}",
        text(&out)
    );
    let open = write_config(dir.path(), &dir.path().join("data"), "").with_file_name("open.toml");
    std::fs::write(&open, "[http]\nbind = \"0.0.0.0:0\"\n").unwrap();
    let out = broker(&["config", "validate", "--config", open.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("http.bind 0.0.0.0:0) without authentication"), "{}", text(&out));
}

#[test]
fn config_init_output_validates_and_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("es.toml");
    let path_s = path.to_str().unwrap();
    let out = broker(&["config", "init", "--output", path_s], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = broker(&["config", "validate", "--config", path_s], &[]);
    assert!(out.status.success() && text(&out).contains("configuration ok"), "{}", text(&out));
    let before = std::fs::read_to_string(&path).unwrap();
    let out = broker(&["config", "init", "--output", path_s], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("not overwriting"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
}

/// Where docs/configuration.md's generated table starts and ends.
const BEGIN: &str = "<!-- BEGIN generated by `es-broker config reference` -->\n";
const END: &str = "<!-- END generated -->";

#[test]
fn docs_configuration_md_is_the_reference_table() {
    let out = broker(&["config", "reference"], &[]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    let doc = std::fs::read_to_string(
        std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../docs/configuration.md"),
    )
    .unwrap();
    let start = doc.find(BEGIN).expect("the begin marker") + BEGIN.len();
    let end = doc.find(END).expect("the end marker");
    assert!(
        doc[start..end] == table,
        "docs/configuration.md is stale: replace the text between its markers with \
         the output of `es-broker config reference`"
    );
}

/// Runs doctor on `data` with free ports; returns (exit code, JSON report).
fn doctor(data: &Path) -> (i32, Value, String) {
    let args = ["doctor", "--json", "--data-dir", data.to_str().unwrap()];
    let ports = ["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"];
    let out = broker(&[&args[..], &ports[..]].concat(), &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (out.status.code().unwrap_or(-1), report, text(&out))
}

fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    let checks = report["checks"].as_array().unwrap();
    checks.iter().find(|c| c["check"] == check).unwrap_or_else(|| panic!("no {check} check in {report}"))
}

#[test]
fn doctor_passes_a_healthy_directory_and_names_a_corrupt_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let r = b.post("/topics", &json!({"name": "d", "config": {"segment.bytes": 4096}}));
    assert_eq!(r.status, 201, "{:?}", r.body);
    for i in 0..6 {
        let r = b
            .post("/topics/d/records", &json!({"records": [{"value": format!("{i}-{}", "x".repeat(3000))}]}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    b.signal("TERM");
    assert!(b.wait_exit(LIMIT).success());

    let (code, report, all) = doctor(dir.path());
    assert_eq!(code, 0, "{all}");
    assert_eq!(report["status"], "ok");
    assert!(finding(&report, "segments")["message"].as_str().unwrap().contains("all consistent"), "{report}");
    assert!(finding(&report, "fsync")["message"].as_str().unwrap().contains("median"), "{report}");

    // A flipped byte inside the oldest (sealed) segment's only batch.
    let segment = dir.path().join("partitions/d-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let middle = bytes.len() - 10;
    bytes[middle] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    let (code, report, all) = doctor(dir.path());
    assert_eq!(code, 2, "{all}");
    let seg = finding(&report, "segments");
    assert_eq!(seg["status"], "fail");
    assert!(seg["message"].as_str().unwrap().contains(segment.to_str().unwrap()), "{seg}");
    assert!(seg["fix"].as_str().unwrap().contains("es-tools restore"), "{seg}");
}

#[test]
fn doctor_fails_a_data_dir_that_cannot_be_written() {
    // The tests may run as root, which writes through any mode: a data directory
    // below a regular file can be created by no one.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let (code, report, all) = doctor(&dir.path().join("file/data"));
    assert_eq!(code, 2, "{all}");
    let data = finding(&report, "data-dir");
    assert_eq!(data["status"], "fail");
    assert!(data["message"].as_str().unwrap().contains("is not a directory"), "{data}");
}

/// docs/operations.md's first walkthrough (config file, `config print`, doctor,
/// start, scrape, stop) runs as written, on free ports.
#[test]
fn the_operations_walkthrough_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<String> =
        (0..3).map(|_| format!("127.0.0.1:{}", es_tests::cluster::free_port())).collect();
    let block = es_tests::walkthrough::block("docs/operations.md", "## Walkthrough: configure");
    let replace =
        [("127.0.0.1:9000", &*ports[0]), ("127.0.0.1:9001", &*ports[1]), ("127.0.0.1:9092", &*ports[2])];
    let walk = es_tests::walkthrough::script(&block, &replace);
    assert!(walk.expected.len() >= 7, "the markers went missing: {:?}", walk.expected);
    let cache = shared_plugin_cache().display().to_string();
    let out = walk.run(dir.path(), &[("ES_PLUGINS_CACHE_DIR", &cache)], Duration::from_secs(180));
    assert!(out.contains(&format!("bind = \"{}\"   # env ES_HTTP_BIND", ports[0])), "{out}");
}
