//! The cold tier's settings (`[cold]`, plus `log.cold_dir`) turned into the log's
//! [`ColdOptions`], with the refusals of unsafe setups: an S3 backend without a
//! bucket, half-given credentials, and a part size too small for the largest
//! segment.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use es_core::limits;
use es_log::{ColdOptions, ColdStore, DirStore, S3Config, S3Store};

use crate::place;
use crate::resolve::Effective;

/// The cold tier asked for, or `None` when there is none.
pub fn options(cfg: &Effective) -> anyhow::Result<Option<ColdOptions>> {
    let store: Arc<dyn ColdStore> = match cfg.text("cold.backend").as_deref().unwrap_or("dir") {
        "dir" => match cfg.path("log.cold_dir") {
            Some(dir) => Arc::new(
                DirStore::new(&dir).with_context(|| format!("opening {}", place(cfg, "log.cold_dir")))?,
            ),
            None => return Ok(None),
        },
        "s3" => Arc::new(
            S3Store::new(s3_config(cfg)?)
                .with_context(|| format!("configuring {}", place(cfg, "cold.backend")))?,
        ),
        other => bail!("{} {other:?} is not a cold-tier backend: use dir or s3", place(cfg, "cold.backend")),
    };
    let int = |id: &str| cfg.int(id).unwrap_or(0);
    check_retention(&place(cfg, "cold.retention_ms"), int("cold.retention_ms"))?;
    let unlimited_as_minus_one = |n: u64| if n == 0 { -1 } else { i64::try_from(n).unwrap_or(i64::MAX) };
    Ok(Some(ColdOptions {
        cache_bytes: int("cold.cache_bytes"),
        retention_ms: unlimited_as_minus_one(int("cold.retention_ms")),
        retention_bytes: unlimited_as_minus_one(int("cold.retention_bytes")),
        ..ColdOptions::new(store)
    }))
}

fn s3_config(cfg: &Effective) -> anyhow::Result<S3Config> {
    let Some(bucket) = cfg.text("cold.bucket").filter(|b| !b.is_empty()) else {
        bail!("{} is s3, but cold.bucket is not set: name the bucket", place(cfg, "cold.backend"));
    };
    let part_size = cfg.int("cold.part_size_bytes").unwrap_or(limits::COLD_PART_BYTES_DEFAULT);
    check_part_size(&place(cfg, "cold.part_size_bytes"), part_size, limits::SEGMENT_BYTES_MAX)?;
    let (access_key_id, secret_access_key) = credentials(cfg)?;
    Ok(S3Config {
        bucket,
        prefix: cfg.text("cold.prefix").unwrap_or_default().trim_matches('/').to_owned(),
        endpoint: cfg.text("cold.endpoint").filter(|e| !e.is_empty()),
        region: cfg.text("cold.region").unwrap_or_else(|| "us-east-1".into()),
        access_key_id,
        secret_access_key,
        session_token: None,
        path_style: cfg.flag("cold.path_style"),
        allow_http: cfg.flag("cold.allow_http"),
        part_size: usize::try_from(part_size).unwrap_or(usize::MAX),
        op_timeout: Duration::from_millis(cfg.int("cold.op_timeout_ms").unwrap_or(30_000)),
    })
}

/// A multipart upload has at most [`limits::COLD_PARTS_MAX`] parts, so a segment
/// larger than that many parts could never be uploaded: refused at start.
fn check_part_size(place: &str, part_size: u64, segment_max: u64) -> anyhow::Result<()> {
    if part_size.saturating_mul(limits::COLD_PARTS_MAX) < segment_max {
        bail!(
            "{place} {part_size} times S3's {} parts is below the largest segment ({segment_max} bytes): such a segment could never be uploaded; raise it",
            limits::COLD_PARTS_MAX
        );
    }
    Ok(())
}

/// Cold data shorter-lived than local data would be deleted as soon as it is
/// tiered: refused against the default `retention.ms` (a topic that sets a longer
/// one is refused when it is created or altered).
fn check_retention(place: &str, cold_ms: u64) -> anyhow::Result<()> {
    let local = limits::RETENTION_MS_DEFAULT as u64;
    if cold_ms != 0 && cold_ms < local {
        bail!(
            "{place} {cold_ms} is shorter than the local retention (retention.ms defaults to {local}): segments would be deleted from the cold tier as soon as they arrive; raise it or set 0 (forever)"
        );
    }
    Ok(())
}

/// The explicit key pair, or neither (the standard AWS variables then apply).
fn credentials(cfg: &Effective) -> anyhow::Result<(Option<String>, Option<String>)> {
    let id = cfg.text("cold.access_key_id").filter(|k| !k.is_empty());
    let inline = cfg.text("cold.secret_access_key").filter(|k| !k.is_empty());
    let from_file = match cfg.path("cold.secret_access_key_file") {
        Some(path) => Some(
            std::fs::read_to_string(&path)
                .with_context(|| {
                    format!("reading {} {}", place(cfg, "cold.secret_access_key_file"), path.display())
                })?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    if inline.is_some() && from_file.is_some() {
        bail!(
            "set {} or {}, not both",
            place(cfg, "cold.secret_access_key"),
            place(cfg, "cold.secret_access_key_file")
        );
    }
    let secret = inline.or(from_file);
    if id.is_some() != secret.is_some() {
        bail!(
            "{} and a secret key ({} or {}) go together: set both, or neither to use the standard AWS variables",
            place(cfg, "cold.access_key_id"),
            place(cfg, "cold.secret_access_key"),
            place(cfg, "cold.secret_access_key_file")
        );
    }
    Ok((id, secret))
}

/// doctor: the cold store reachable, by a put, get and delete of a probe object.
pub fn doctor(cfg: &Effective) -> Vec<crate::doctor::Finding> {
    use crate::doctor::Finding;
    let options = match options(cfg) {
        Ok(Some(o)) => o,
        Ok(None) => return vec![Finding::ok("cold", "no cold tier configured")],
        Err(e) => return vec![Finding::fail("cold", format!("{e:#}"), "fix the [cold] settings")],
    };
    let store = options.store;
    match probe(store.as_ref()) {
        Ok(took) => vec![Finding::ok(
            "cold",
            format!("{} reachable: probe object put, read back and deleted in {took:?}", store.describe()),
        )],
        Err(e) => vec![Finding::fail(
            "cold",
            format!("{}: {e:#}", store.describe()),
            "check cold.endpoint, cold.bucket (it must exist), the credentials and the network; while the store fails, the broker keeps expired segments local and retries uploads with backoff",
        )],
    }
}

fn probe(store: &dyn ColdStore) -> anyhow::Result<Duration> {
    let started = std::time::Instant::now();
    let nonce =
        format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos());
    let key = format!("doctor/probe-{nonce}");
    let tmp = std::env::temp_dir().join(format!("es-doctor-probe-{nonce}"));
    std::fs::write(&tmp, nonce.as_bytes()).context("writing the probe file")?;
    let put = store.put_file(&key, &tmp);
    let _ = std::fs::remove_file(&tmp);
    put.context("putting a probe object")?;
    let back = store.get_range(&key, 0..nonce.len() as u64).context("reading the probe object back");
    store.delete(&key).context("deleting the probe object")?;
    if back?.as_ref() != nonce.as_bytes() {
        bail!("the probe object read back differs from what was written");
    }
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cold_retention_shorter_than_the_local_one_is_refused() {
        assert!(check_retention("cold.retention_ms", 0).is_ok());
        assert!(check_retention("cold.retention_ms", 30 * 24 * 3600 * 1000).is_ok());
        let err = check_retention("cold.retention_ms", 3_600_000).unwrap_err();
        assert!(err.to_string().contains("shorter than the local retention"), "{err}");
    }

    #[test]
    fn a_part_size_too_small_for_the_largest_segment_is_refused() {
        assert!(check_part_size("cold.part_size_bytes", 5 << 20, limits::SEGMENT_BYTES_MAX).is_ok());
        let err = check_part_size("cold.part_size_bytes", 1024, limits::SEGMENT_BYTES_MAX).unwrap_err();
        assert!(err.to_string().contains("could never be uploaded"), "{err}");
    }
}
