//! Unit tests of `src/lock_hold/mod.rs`: when a hold read in part is still decided.

use super::*;
use crate::rules::decision::ReadError;

fn hold(users: Fact<Vec<Pod>>, writer: Fact<Arc<Pod>>, node: Fact<Arc<Node>>) -> Hold {
    Hold {
        users,
        writer: writer.into(),
        node,
        gone_recorded: false,
        observed: rwo_lock::LockAge::quiet(Duration::ZERO),
    }
}

fn unread<T>() -> Fact<T> {
    Fact::Unknown(ReadError::Timeout {
        what: "a read".into(),
    })
}

#[test]
fn a_user_found_decides_whatever_else_was_unread() {
    let user = crate::model::testing::pod("ns", "p");
    assert!(!hold(Fact::Found(vec![user]), unread(), unread()).undecided());
}

#[test]
fn with_nobody_there_an_unread_pod_or_node_leaves_it_undecided() {
    let node = Fact::Found(Arc::new(crate::model::testing::node("n1")));
    assert!(hold(unread(), Fact::Missing, node.clone()).undecided());
    assert!(hold(Fact::Found(vec![]), unread(), node.clone()).undecided());
    assert!(hold(Fact::Found(vec![]), Fact::Missing, unread()).undecided());
    assert!(!hold(Fact::Found(vec![]), Fact::Missing, node).undecided());
}
