//! The pepper: 32 random bytes kept apart from the auth state (its own file, mode
//! 0600), so a copy of the metadata alone cannot check guesses against stored
//! hashes. Created on first start; losing it invalidates every key.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use es_auth::Pepper;
use rand::RngCore;

use crate::service::error::{BrokerError, Result};

const PEPPER_BYTES: usize = 32;

pub fn load_or_create(path: &Path) -> Result<Pepper> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(e) => Err(BrokerError::Internal(format!("reading the pepper {}: {e}", path.display()))),
    }
}

fn parse(path: &Path, text: &str) -> Result<Pepper> {
    let text = text.trim();
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    let bytes: [u8; PEPPER_BYTES] = bytes.and_then(|b| b.try_into().ok()).ok_or_else(|| {
        BrokerError::InvalidConfig(format!(
            "the pepper file {} must hold {PEPPER_BYTES} bytes as {} hex digits",
            path.display(),
            PEPPER_BYTES * 2
        ))
    })?;
    Ok(Pepper::new(bytes))
}

fn create(path: &Path) -> Result<Pepper> {
    let io =
        |e: std::io::Error| BrokerError::Internal(format!("creating the pepper {}: {e}", path.display()));
    let mut bytes = [0u8; PEPPER_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    writeln!(f, "{hex}").map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    crate::store::fsync_dir(path.parent().unwrap_or(Path::new("."))).map_err(io)?;
    Ok(Pepper::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pepper_is_created_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pepper");
        let a = load_or_create(&path).unwrap();
        let b = load_or_create(&path).unwrap();
        let secret = es_auth::Secret::parse(&"A".repeat(43)).unwrap();
        assert!(a.hash_secret(&secret).matches(&b.hash_secret(&secret)));
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&path, "zz").unwrap();
        assert_eq!(load_or_create(&path).err().unwrap().code(), "invalid_config");
    }
}
