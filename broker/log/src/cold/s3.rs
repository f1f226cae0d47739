//! The S3-compatible backend of the cold tier, on object_store. Segments go up as
//! one PUT, or as a multipart upload in `part_size` parts past that (S3 PUT is
//! durable on 200; a multipart upload is durable once completed). Manifests are
//! written with `If-None-Match`/`If-Match`. object_store is async, the log is not:
//! the store owns a small runtime and every call waits on it at most `op_timeout`,
//! so a slow store never holds a log thread longer than that.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjPath;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion,
    WriteMultipart,
};

use super::store::{ColdStore, Expect, Listed};
use crate::error::{LogError, Result};

/// Everything that says where the bucket is and how to reach it.
#[derive(Clone, Default)]
pub struct S3Config {
    pub bucket: String,
    /// Key prefix for every object of this broker (no leading or trailing `/`).
    pub prefix: String,
    /// A custom endpoint (MinIO, moto, R2...); `None` is AWS.
    pub endpoint: Option<String>,
    pub region: String,
    /// Explicit credentials; `None` falls back to the standard AWS variables.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// Path-style requests (`endpoint/bucket/key`), as MinIO and moto want.
    pub path_style: bool,
    pub allow_http: bool,
    /// The part size of multipart uploads; smaller objects go up in one PUT.
    pub part_size: usize,
    /// The longest one store call may take, retries included.
    pub op_timeout: Duration,
}

impl std::fmt::Debug for S3Config {
    // Never prints a credential.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct S3Store {
    store: Arc<AmazonS3>,
    config: S3Config,
    runtime: tokio::runtime::Runtime,
}

impl S3Store {
    pub fn new(config: S3Config) -> Result<S3Store> {
        // reqwest is built without a bundled provider: rustls uses ring, as every
        // other TLS endpoint of es does. Installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bad = |reason: String| LogError::ColdStore { op: "configure", key: String::new(), reason };
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_allow_http(config.allow_http)
            .with_virtual_hosted_style_request(!config.path_style)
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(config.op_timeout)
                    .with_connect_timeout(config.op_timeout.min(Duration::from_secs(10)))
                    .with_allow_http(config.allow_http),
            )
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: config.op_timeout,
                ..RetryConfig::default()
            });
        if let Some(e) = &config.endpoint {
            builder = builder.with_endpoint(e);
        }
        if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
            builder = builder.with_access_key_id(id).with_secret_access_key(secret);
        }
        if let Some(t) = &config.session_token {
            builder = builder.with_token(t);
        }
        let store = builder.build().map_err(|e| bad(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("es-cold-s3")
            .enable_all()
            .build()
            .map_err(|e| bad(format!("starting the S3 client runtime: {e}")))?;
        Ok(S3Store { store: Arc::new(store), config, runtime })
    }

    fn key(&self, key: &str) -> ObjPath {
        match self.config.prefix.is_empty() {
            true => ObjPath::from(key),
            false => ObjPath::from(format!("{}/{key}", self.config.prefix)),
        }
    }

    /// Runs `fut` on the store's runtime and waits at most twice `op_timeout` (the
    /// client's own timeout fires first; this bounds what it does not cover).
    /// Works from any thread, async ones included: it never enters the runtime.
    fn run<T: Send + 'static>(
        &self,
        op: &'static str,
        key: &str,
        fut: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let task = self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let wait = self.config.op_timeout.saturating_mul(2);
        match rx.recv_timeout(wait) {
            Ok(result) => result.map_err(|e| store_error(op, key, e)),
            Err(_) => {
                task.abort();
                Err(LogError::ColdStore { op, key: key.into(), reason: format!("no answer within {wait:?}") })
            }
        }
    }
}

fn store_error(op: &'static str, key: &str, e: object_store::Error) -> LogError {
    match e {
        object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => {
            LogError::ColdConflict { key: key.into() }
        }
        other => LogError::ColdStore { op, key: key.into(), reason: other.to_string() },
    }
}

impl ColdStore for S3Store {
    fn put_file(&self, key: &str, path: &Path) -> Result<()> {
        let len = std::fs::metadata(path)
            .map_err(|e| LogError::io(format!("reading {}", path.display()), e))?
            .len();
        let (store, loc, part, path) =
            (self.store.clone(), self.key(key), self.config.part_size, path.to_owned());
        if len <= part as u64 {
            let bytes =
                std::fs::read(&path).map_err(|e| LogError::io(format!("reading {}", path.display()), e))?;
            return self.run(
                "put",
                key,
                async move { store.put(&loc, PutPayload::from(bytes)).await.map(drop) },
            );
        }
        self.run("multipart put", key, async move {
            let upload = store.put_multipart(&loc).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
            let mut file = std::fs::File::open(&path).map_err(|e| generic(e.into()))?;
            let mut buf = vec![0u8; part];
            loop {
                let n = read_full(&mut file, &mut buf).map_err(|e| generic(e.into()))?;
                if n == 0 {
                    break;
                }
                writer.wait_for_capacity(4).await?;
                writer.write(&buf[..n]);
            }
            writer.finish().await.map(drop)
        })
    }

    fn put_if(&self, key: &str, data: Bytes, expect: &Expect) -> Result<String> {
        let mode = match expect {
            Expect::Absent => PutMode::Create,
            Expect::Version(v) => PutMode::Update(UpdateVersion { e_tag: Some(v.clone()), version: None }),
        };
        let (store, loc) = (self.store.clone(), self.key(key));
        let opts = PutOptions { mode, ..PutOptions::default() };
        let result =
            self.run("conditional put", key, async move { store.put_opts(&loc, data.into(), opts).await })?;
        Ok(result.e_tag.unwrap_or_default())
    }

    fn get(&self, key: &str) -> Result<Option<(Bytes, String)>> {
        let (store, loc) = (self.store.clone(), self.key(key));
        let got = self.run("get", key, async move {
            match store.get(&loc).await {
                Ok(r) => {
                    let etag = r.meta.e_tag.clone().unwrap_or_default();
                    Ok(Some((r.bytes().await?, etag)))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        Ok(got)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let (store, loc) = (self.store.clone(), self.key(key));
        self.run("get", key, async move { store.get_range(&loc, range).await })
    }

    fn list(&self, prefix: &str) -> Result<Vec<Listed>> {
        let (store, loc) = (self.store.clone(), self.key(prefix.trim_end_matches('/')));
        let strip = match self.config.prefix.is_empty() {
            true => String::new(),
            false => format!("{}/", self.config.prefix),
        };
        let metas = self.run("list", prefix, async move {
            let mut out = Vec::new();
            let mut stream = store.list(Some(&loc));
            while let Some(meta) = stream.next().await {
                out.push(meta?);
            }
            Ok(out)
        })?;
        let mut out: Vec<Listed> = metas
            .into_iter()
            .map(|m| Listed { key: m.location.as_ref().trim_start_matches(&strip).to_owned(), size: m.size })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let (store, loc) = (self.store.clone(), self.key(key));
        self.run("delete", key, async move {
            match store.delete(&loc).await {
                Err(object_store::Error::NotFound { .. }) => Ok(()),
                other => other,
            }
        })
    }

    fn describe(&self) -> String {
        let at = self.config.endpoint.as_deref().unwrap_or("AWS");
        format!("s3://{}/{} at {at}", self.config.bucket, self.config.prefix)
    }
}

fn generic(source: Box<dyn std::error::Error + Send + Sync>) -> object_store::Error {
    object_store::Error::Generic { store: "es-cold", source }
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
