//! The sticky assignor. Every partition goes to exactly one member, member loads
//! differ by at most one, and a partition moves only when its previous owner is gone
//! or holds more than its share: the fewest moves any balanced assignment allows.

use std::collections::{BTreeMap, BTreeSet};

use crate::TopicPartition;

/// Partition -> member.
pub type Assignment = BTreeMap<TopicPartition, String>;

/// Assigns `partitions` to `members`, keeping `previous` owners wherever balance allows.
///
/// Members that already hold the most partitions get the larger shares (`base + 1`),
/// so the number of partitions that must move is as small as possible.
pub fn assign(
    partitions: &BTreeSet<TopicPartition>,
    members: &BTreeSet<String>,
    previous: &Assignment,
) -> Assignment {
    let mut out = Assignment::new();
    if members.is_empty() {
        return out;
    }
    let mut held: BTreeMap<&str, Vec<&TopicPartition>> =
        members.iter().map(|m| (m.as_str(), Vec::new())).collect();
    for (tp, m) in previous {
        if let (true, Some(list)) = (partitions.contains(tp), held.get_mut(m.as_str())) {
            list.push(tp);
        }
    }
    let mut order: Vec<&str> = held.keys().copied().collect();
    order.sort_by(|a, b| held[b].len().cmp(&held[a].len()).then(a.cmp(b)));
    let (base, extra) = (partitions.len() / members.len(), partitions.len() % members.len());
    let quota = |rank: usize| base + usize::from(rank < extra);
    for (rank, m) in order.iter().enumerate() {
        for tp in held[m].iter().take(quota(rank)) {
            out.insert((*tp).clone(), (*m).to_owned());
        }
    }
    let free: Vec<&TopicPartition> = partitions.iter().filter(|tp| !out.contains_key(*tp)).collect();
    let mut free = free.into_iter();
    for (rank, m) in order.iter().enumerate() {
        let have = out.values().filter(|o| o.as_str() == *m).count();
        for tp in free.by_ref().take(quota(rank).saturating_sub(have)) {
            out.insert(tp.clone(), (*m).to_owned());
        }
    }
    assert_eq!(out.len(), partitions.len(), "every partition is assigned exactly once");
    out
}

/// How many partitions changed owner between two assignments (new or dropped ones excluded).
pub fn moved(before: &Assignment, after: &Assignment) -> usize {
    after.iter().filter(|(tp, m)| before.get(*tp).is_some_and(|b| b != *m)).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tps(n: u32) -> BTreeSet<TopicPartition> {
        (0..n).map(|p| TopicPartition::new("t", p)).collect()
    }

    fn names(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    fn loads(a: &Assignment, members: &BTreeSet<String>) -> Vec<usize> {
        members.iter().map(|m| a.values().filter(|o| *o == m).count()).collect()
    }

    fn check_balanced(a: &Assignment, parts: &BTreeSet<TopicPartition>, members: &BTreeSet<String>) {
        assert_eq!(a.keys().cloned().collect::<BTreeSet<_>>(), *parts, "every partition exactly once");
        assert!(a.values().all(|m| members.contains(m)), "only live members own partitions");
        let l = loads(a, members);
        let (min, max) = (l.iter().min().copied().unwrap_or(0), l.iter().max().copied().unwrap_or(0));
        assert!(max - min <= 1, "balanced within one: {l:?}");
    }

    #[test]
    fn three_members_six_partitions() {
        let a = assign(&tps(6), &names(3), &Assignment::new());
        assert_eq!(loads(&a, &names(3)), vec![2, 2, 2]);
    }

    #[test]
    fn a_joining_member_takes_only_its_share() {
        let before = assign(&tps(6), &names(3), &Assignment::new());
        let after = assign(&tps(6), &names(4), &before);
        check_balanced(&after, &tps(6), &names(4));
        assert_eq!(moved(&before, &after), 1);
    }

    #[test]
    fn a_leaving_member_s_partitions_alone_move() {
        let before = assign(&tps(6), &names(3), &Assignment::new());
        let two: BTreeSet<String> = names(3).into_iter().filter(|m| m != "m1").collect();
        let after = assign(&tps(6), &two, &before);
        check_balanced(&after, &tps(6), &two);
        assert_eq!(moved(&before, &after), 2);
    }

    #[test]
    fn no_members_no_assignment() {
        assert!(assign(&tps(3), &BTreeSet::new(), &Assignment::new()).is_empty());
    }

    /// The fewest moves a balanced result allows: partitions over each survivor's
    /// largest possible share, plus every partition of a departed member.
    fn minimal_moves(
        before: &Assignment,
        parts: &BTreeSet<TopicPartition>,
        members: &BTreeSet<String>,
    ) -> usize {
        let (base, extra) = (parts.len() / members.len(), parts.len() % members.len());
        let mut held: Vec<usize> = members
            .iter()
            .map(|m| before.iter().filter(|(tp, o)| *o == m && parts.contains(*tp)).count())
            .collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        let kept: usize =
            held.iter().enumerate().map(|(rank, h)| (*h).min(base + usize::from(rank < extra))).sum();
        let survivors_held: usize = before.iter().filter(|(tp, _)| parts.contains(*tp)).count();
        survivors_held - kept
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        #[test]
        fn always_exact_balanced_and_minimal(
            partitions in 0u32..40,
            before_members in 1usize..8,
            after_members in 1usize..8,
            shift in 0usize..4,
        ) {
            let parts = tps(partitions);
            let before = assign(&parts, &names(before_members), &Assignment::new());
            // Survivors are a window of the old names plus some new ones.
            let after: BTreeSet<String> = (shift..shift + after_members).map(|i| format!("m{i}")).collect();
            let result = assign(&parts, &after, &before);
            check_balanced(&result, &parts, &after);
            let expected = minimal_moves(&before, &parts, &after);
            prop_assert_eq!(moved(&before, &result), expected);
        }
    }
}
