//! Durable producer-id allocation for idempotent producers. Ids are handed out from
//! blocks reserved on disk (write temp, fsync, rename, fsync dir) before use, so a
//! restart, even after kill -9, never hands out an id twice: it starts past the last
//! reserved block.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::service::error::{BrokerError, Result};

const FILE: &str = "producer-ids";
const BLOCK: i64 = 1000;

#[derive(Debug)]
pub struct ProducerIds {
    path: PathBuf,
    /// (next id to hand out, first id not yet reserved on disk)
    state: Mutex<(i64, i64)>,
}

impl ProducerIds {
    pub fn open(data_dir: &Path) -> Result<ProducerIds> {
        let path = data_dir.join(FILE);
        let reserved = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                BrokerError::Internal(format!("{} is corrupt: expected one number", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(BrokerError::Internal(format!("reading {}: {e}", path.display()))),
        };
        Ok(ProducerIds { path, state: Mutex::new((reserved, reserved)) })
    }

    /// True when `id` was handed out by this broker, in this run or an earlier
    /// one. Ids of a block reserved but not reached before a restart count as
    /// issued: the file keeps only the block's end, and no one else can hold them.
    pub fn issued(&self, id: i64) -> bool {
        let st = self.state.lock().expect("producer ids lock");
        (0..st.0).contains(&id)
    }

    /// A new producer id (epoch 0), durable before it is returned.
    pub fn allocate(&self) -> Result<(i64, i16)> {
        let mut st = self.state.lock().expect("producer ids lock");
        if st.0 >= st.1 {
            let reserved = st.1 + BLOCK;
            persist(&self.path, reserved)?;
            st.1 = reserved;
        }
        let id = st.0;
        st.0 += 1;
        Ok((id, 0))
    }
}

fn persist(path: &Path, reserved: i64) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let io = |e: std::io::Error| {
        BrokerError::Internal(format!("reserving producer ids in {}: {e}", path.display()))
    };
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    writeln!(f, "{reserved}").map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    crate::store::fsync_dir(path.parent().unwrap_or(Path::new("."))).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.allocate().unwrap().0).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIds::open(dir.path()).unwrap();
        assert_eq!(b.allocate().unwrap().0, BLOCK, "a restart skips the whole reserved block");
    }

    #[test]
    fn only_issued_ids_are_known() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIds::open(dir.path()).unwrap();
        assert!(!a.issued(0), "nothing is issued before the first allocation");
        let (id, _) = a.allocate().unwrap();
        assert!(a.issued(id));
        assert!(!a.issued(id + 1) && !a.issued(-1) && !a.issued(999));
        drop(a);
        let b = ProducerIds::open(dir.path()).unwrap();
        assert!(b.issued(id), "an id issued before a restart stays known");
        assert!(!b.issued(BLOCK), "the next block's ids are not issued yet");
    }
}
