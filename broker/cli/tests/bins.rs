//! Checks that both binaries start and describe themselves. Having an integration
//! test here also makes `cargo test --workspace` build fresh `es-broker` and `es`
//! binaries in target/, which the black-box tests in tests/ run.

use std::process::Command;

#[test]
fn binaries_print_help() {
    for (bin, expect) in
        [(env!("CARGO_BIN_EXE_es-broker"), "--data-dir"), (env!("CARGO_BIN_EXE_es"), "produce")]
    {
        let out = Command::new(bin).arg("--help").output().unwrap();
        assert!(out.status.success(), "{bin} --help failed");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(expect), "{bin} --help lacks {expect}: {text}");
    }
}

#[test]
fn broker_refuses_a_non_loopback_bind_before_touching_data() {
    let dir = std::env::temp_dir().join(format!("es-cli-bind-test-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .arg("--data-dir")
        .arg(&dir)
        .args(["--bind", "10.1.2.3:9000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without authentication: start with --auth"));
    assert!(!dir.exists(), "the refused broker created its data directory");
}
