//! A partition's cold manifest: every segment in the cold tier, with the size and
//! sha256 of each of its objects as measured before upload. It is the only thing
//! a read trusts: an object that does not match it is never served. Kept durably
//! in the partition directory and published to the store after every change.

use std::fmt::Write as _;

use crate::error::{LogError, Result};

const HEADER: &str = "es-cold-manifest 1";

/// One object of a segment: its file extension, size and sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSum {
    pub ext: String,
    pub size: u64,
    pub sha256: String,
}

/// One cold segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub base: u64,
    pub next_offset: u64,
    pub max_timestamp: Option<i64>,
    pub compacted: bool,
    /// The unique key stem its objects share (`<base>-<nonce>`).
    pub stem: String,
    /// Wall-clock time of the upload.
    pub uploaded_ms: i64,
    pub objects: Vec<ObjectSum>,
}

impl Entry {
    pub fn object(&self, ext: &str) -> Option<&ObjectSum> {
        self.objects.iter().find(|o| o.ext == ext)
    }

    pub fn log_size(&self) -> u64 {
        self.object(crate::files::LOG_EXT).map_or(0, |o| o.size)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// By base offset, oldest first.
    pub entries: Vec<Entry>,
}

impl Manifest {
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for e in &self.entries {
            let ts = e.max_timestamp.map_or("-".to_owned(), |t| t.to_string());
            let _ = write!(
                out,
                "{} {} {ts} {} {} {}",
                e.base,
                e.next_offset,
                u8::from(e.compacted),
                e.stem,
                e.uploaded_ms
            );
            for o in &e.objects {
                let _ = write!(out, " {}:{}:{}", o.ext, o.size, o.sha256);
            }
            out.push('\n');
        }
        out
    }

    pub fn decode(text: &str) -> Result<Manifest> {
        let bad = |line: usize, why: &str| LogError::ColdManifest(format!("line {}: {why}", line + 1));
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(HEADER) {
            return Err(bad(0, "not an es cold manifest (version 1)"));
        }
        let mut entries: Vec<Entry> = Vec::new();
        for (n, line) in lines {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 6 {
                return Err(bad(n, "too few fields"));
            }
            let num = |s: &str| s.parse::<u64>().map_err(|_| bad(n, "not a number"));
            let max_timestamp = match f[2] {
                "-" => None,
                t => Some(t.parse::<i64>().map_err(|_| bad(n, "bad timestamp"))?),
            };
            let objects = f[6..]
                .iter()
                .map(|o| decode_object(o).ok_or_else(|| bad(n, "bad object")))
                .collect::<Result<_>>()?;
            let entry = Entry {
                base: num(f[0])?,
                next_offset: num(f[1])?,
                max_timestamp,
                compacted: f[3] == "1",
                stem: f[4].to_owned(),
                uploaded_ms: f[5].parse().map_err(|_| bad(n, "bad upload time"))?,
                objects,
            };
            if entries.last().is_some_and(|l| l.next_offset > entry.base) || entry.next_offset < entry.base {
                return Err(bad(n, "segments overlap or are out of order"));
            }
            entries.push(entry);
        }
        Ok(Manifest { entries })
    }
}

fn decode_object(s: &str) -> Option<ObjectSum> {
    let mut it = s.splitn(3, ':');
    let ext = it.next()?.to_owned();
    let size = it.next()?.parse().ok()?;
    let sha256 = it.next()?.to_owned();
    (sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit())).then_some(ObjectSum {
        ext,
        size,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(base: u64, next: u64) -> Entry {
        Entry {
            base,
            next_offset: next,
            max_timestamp: Some(5),
            compacted: false,
            stem: format!("{base:020}-ab"),
            uploaded_ms: 9,
            objects: vec![ObjectSum { ext: "log".into(), size: 10, sha256: "a".repeat(64) }],
        }
    }

    #[test]
    fn a_manifest_round_trips_and_overlaps_are_refused() {
        let m = Manifest { entries: vec![entry(0, 10), entry(10, 20)] };
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        let overlapping = Manifest { entries: vec![entry(0, 10), entry(5, 20)] };
        assert!(Manifest::decode(&overlapping.encode()).is_err());
        assert!(Manifest::decode("something else\n").is_err());
        let short_sha = m.encode().replace(&"a".repeat(64), "abc");
        assert!(Manifest::decode(&short_sha).is_err());
    }
}
