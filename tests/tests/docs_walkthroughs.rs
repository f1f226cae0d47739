//! The walkthroughs in README.md ("Try it"), docs/plugins.md ("From `cargo new`
//! to a bound validator") and docs/security.md ("Walkthrough", which starts its own
//! broker) run here, as written, against the real broker and `es`, so the
//! documents cannot drift from the code (`es_tests::walkthrough`: `# prints: TEXT`
//! must show in the output; `# fails: TEXT` means the command must fail and TEXT show).

use std::time::Duration;

use es_tests::broker::{Broker, shared_plugin_cache};
use es_tests::cluster::free_port;
use es_tests::walkthrough::{Walk, block, blocks, repo, script};

/// `block` with the documented broker address moved to `b`'s and `/path/to/es`
/// to this checkout.
fn against(block: &str, b: &Broker) -> Walk {
    let addr = b.url.trim_start_matches("http://").to_owned();
    let root = repo().to_str().unwrap().to_owned();
    script(block, &[("/path/to/es", &root), ("localhost:9000", &addr)])
}

#[test]
fn readme_try_it_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(&dir.path().join("data"));
    let walk = against(&block("README.md", "## Try it"), &b);
    assert!(walk.expected.len() >= 5, "the markers went missing: {:?}", walk.expected);
    let out = walk.run(dir.path(), &[("ES_BROKER", &b.url)], Duration::from_secs(60));
    let paths = out.lines().filter(|l| l.starts_with('/')).count();
    assert_eq!(paths, 5, "the first five OpenAPI paths were not listed:\n{out}");
}

#[test]
fn plugins_md_rust_walkthrough_runs_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(&dir.path().join("data"));
    let walk = against(&block("docs/plugins.md", "### From `cargo new`"), &b);
    walk.run(dir.path(), &[("ES_BROKER", &b.url)], Duration::from_secs(900));
    let wasm = dir.path().join("max-key/target/wasm32-wasip2/release/max_key.wasm");
    assert!(wasm.exists(), "no component at {}", wasm.display());
}

#[test]
fn security_md_walkthrough_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (http, binary, kafka) = (free_port(), free_port(), free_port());
    let http_addr = format!("127.0.0.1:{http}");
    let binary_addr = format!("127.0.0.1:{binary}");
    let kafka_addr = format!("127.0.0.1:{kafka}");
    let moves = [("127.0.0.1:9000", http_addr.as_str()), ("127.0.0.1:9092", kafka_addr.as_str())];
    let walk = script(&blocks("docs/security.md", "## Walkthrough"), &moves);
    assert!(walk.expected.len() >= 15, "the markers went missing: {:?}", walk.expected);
    let cache = shared_plugin_cache();
    let env = [
        ("ES_HTTP_BIND", http_addr.as_str()),
        ("ES_BINARY_BIND", binary_addr.as_str()),
        ("ES_KAFKA_BIND", kafka_addr.as_str()),
        ("ES_BROKER_BINARY", binary_addr.as_str()),
        ("ES_PLUGIN_CACHE_DIR", cache.to_str().unwrap()),
    ];
    let ran = std::panic::catch_unwind(|| walk.run(dir.path(), &env, Duration::from_secs(180)));
    let log = std::fs::read_to_string(dir.path().join("broker.log")).unwrap_or_default();
    if let Err(e) = ran {
        eprintln!("broker.log:\n{log}");
        std::panic::resume_unwind(e)
    }
    // The broker really ran with TLS on every listener and auth on.
    assert!(log.contains(&format!("listening on https://{http_addr}")), "broker.log:\n{log}");
    assert!(log.contains(&format!("listening on es://{binary_addr} (tls)")), "broker.log:\n{log}");
}
