//! The es-tools binary's surface: its help names both commands, and a refusal is
//! one plain sentence on stderr with exit code 1. Having an integration test here
//! also makes `cargo test --workspace` build a fresh `es-tools`, which the
//! black-box tests in tests/ run.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_es-tools");

#[test]
fn help_names_dump_and_restore() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("dump") && text.contains("restore"), "{text}");
}

#[test]
fn a_missing_data_dir_is_one_plain_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["dump", "--data-dir", "absent", "--out", "b.tar"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(text.trim(), "es-tools: absent is not a broker data directory: no such directory");
    assert!(!dir.path().join("absent").exists(), "a refused dump created the directory");
}

#[test]
fn a_missing_archive_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["restore", "--archive", "none.tar", "--data-dir", "data"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("opening none.tar") && text.contains("nothing was replaced"), "{text}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
