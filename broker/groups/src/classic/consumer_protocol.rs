//! Reads the topics out of the "consumer" protocol's opaque member metadata
//! (ConsumerProtocolSubscription) and assignments (ConsumerProtocolAssignment), so
//! `es group describe` can show a Kafka group's topics and partitions. Only the
//! leading fields are read, which every version (0-3) shares: a version, then the
//! topics (non-flexible encoding). A hand-written reader, since the kafka-protocol
//! decoders size allocations from unchecked wire counts: every count here is
//! checked against the bytes left. Anything unreadable is `None`, never a panic.

use crate::TopicPartition;

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array count that fits: each element takes at least `min_bytes`.
    fn count(&mut self, min_bytes: usize) -> Option<usize> {
        let n = usize::try_from(self.i32()?).ok()?;
        (n.checked_mul(min_bytes)? <= self.buf.len()).then_some(n)
    }

    fn string(&mut self) -> Option<String> {
        let n = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// The topics a member subscribes to.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader { buf: metadata };
    r.i16()?;
    let n = r.count(2)?;
    (0..n).map(|_| r.string()).collect()
}

/// The partitions a member was assigned.
pub fn assigned_partitions(assignment: &[u8]) -> Option<Vec<TopicPartition>> {
    if assignment.is_empty() {
        return Some(Vec::new());
    }
    let mut r = Reader { buf: assignment };
    r.i16()?;
    let topics = r.count(6)?;
    let mut out = Vec::new();
    for _ in 0..topics {
        let topic = r.string()?;
        let partitions = r.count(4)?;
        for _ in 0..partitions {
            let p = u32::try_from(r.i32()?).ok()?;
            out.push(TopicPartition::new(topic.clone(), p));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as i16).to_be_bytes());
        out.extend(s.as_bytes());
    }

    #[test]
    fn reads_what_java_and_librdkafka_send_and_refuses_lies() {
        let mut sub = 1i16.to_be_bytes().to_vec();
        sub.extend(2i32.to_be_bytes());
        string(&mut sub, "orders");
        string(&mut sub, "payments");
        sub.extend((-1i32).to_be_bytes()); // null user data, then v1's owned partitions
        assert_eq!(subscription_topics(&sub), Some(vec!["orders".to_owned(), "payments".to_owned()]));
        let mut a = 0i16.to_be_bytes().to_vec();
        a.extend(1i32.to_be_bytes());
        string(&mut a, "orders");
        a.extend(2i32.to_be_bytes());
        a.extend(0i32.to_be_bytes());
        a.extend(5i32.to_be_bytes());
        a.extend((-1i32).to_be_bytes());
        let want = vec![TopicPartition::new("orders", 0), TopicPartition::new("orders", 5)];
        assert_eq!(assigned_partitions(&a), Some(want));
        assert_eq!(assigned_partitions(b""), Some(vec![]));
        // A count far past the bytes there, a truncated body, a negative partition.
        let mut huge = 0i16.to_be_bytes().to_vec();
        huge.extend(i32::MAX.to_be_bytes());
        assert_eq!(assigned_partitions(&huge), None);
        assert_eq!(subscription_topics(&huge), None);
        assert_eq!(assigned_partitions(&a[..a.len() - 9]), None);
        let mut neg = a.clone();
        let at = neg.len() - 8;
        neg[at..at + 4].copy_from_slice(&(-3i32).to_be_bytes());
        assert_eq!(assigned_partitions(&neg), None);
        assert_eq!(subscription_topics(b"\x00"), None);
    }
}
