//! A seconds-long run of `es-bench kafka` against the es-broker of this build, es
//! rows only (no Apache Kafka): the load generator still speaks to the Kafka
//! listener, writes its report and stops the broker it started. It checks the
//! shape of the report only; throughput belongs in docs/benchmarks.md, never in a
//! timed test.

use std::process::Command;
use std::time::Duration;

use es_tests::broker::broker_bin;
use es_tests::peers::run;
use serde_json::Value;

#[test]
fn a_tiny_es_bench_kafka_run_reports_every_row_and_ratio() {
    // `cargo build --release --workspace` puts es-bench beside es-broker.
    let bench = broker_bin().with_file_name("es-bench");
    assert!(bench.exists(), "{} is missing: cargo build --release --workspace", bench.display());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut cmd = Command::new(&bench);
    cmd.args(["kafka", "--no-reference", "--seconds", "0.3", "--rounds", "2", "--warmup-seconds", "0"])
        .args(["--producers", "2", "--partitions", "1", "--row-mib", "4", "--consume-mib", "2"])
        .arg("--broker-bin")
        .arg(broker_bin())
        .arg("--dir")
        .arg(dir.path().join("data"))
        .arg("--out")
        .arg(&out);
    let stdout = run(&mut cmd, None, Duration::from_secs(120), "es-bench kafka");
    assert!(stdout.contains("es kafka"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("kafka.json")).unwrap()).unwrap();
    let labels: Vec<&str> =
        report["rows"].as_array().unwrap().iter().map(|r| r["case"]["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["es binary produce 2x1p", "es kafka produce 2x1p", "es binary consume 1c", "es kafka consume 1c"],
        "{stdout}"
    );
    for row in report["rows"].as_array().unwrap() {
        assert_eq!(row["rounds"].as_array().unwrap().len(), 2, "{row}");
        assert!(row["median"]["records"].as_u64().unwrap() > 0, "a row moved no records: {row}");
    }
    // Only the ratio to es binary, without Apache Kafka; its verdict is not checked.
    let ratios = report["ratios"].as_array().unwrap();
    assert_eq!(ratios.len(), 1, "{ratios:?}");
    assert_eq!(ratios[0]["baseline"], "es_binary");
    // The broker it started is gone with its data.
    assert!(std::fs::read_dir(dir.path().join("data")).unwrap().next().is_none(), "data left behind");
}
