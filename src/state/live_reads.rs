//! `volguard_live_reads_total{read,kind,result}`: how the live reads a decision or a release
//! waits on were answered. Under load, the one figure that says whether "unsure, so in use"
//! refusals come from the apiserver's throttling or from volguard's own deadline.

use crate::rules::Fact;
use crate::rules::decision::ReadError;
use crate::runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::LazyLock;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadLabels {
    /// `get`, `list` (a paged LIST counts once), or `list_since` (a LIST not older than an
    /// object's resourceVersion: the apiserver's watch cache; one not answered is read again as
    /// a `list`).
    read: &'static str,
    kind: &'static str,
    result: &'static str,
}

/// One family per process: the reads are free functions over a client, shared by every job the
/// process runs, and a process registers it once, in the registry it serves.
static READS: LazyLock<Family<ReadLabels, Counter>> = LazyLock::new(Family::default);

/// Every result a read can have, so that a dashboard sees 0 rather than nothing.
pub const RESULTS: [&str; 7] = [
    "found",
    "missing",
    "timeout",
    "throttled",
    "refused",
    "error",
    "decode",
];

/// Reads "not older than" a version that this process's own cache answered (its watch had
/// applied that version): no request made.
static BY_CACHE: LazyLock<Family<CacheLabels, Counter>> = LazyLock::new(Family::default);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    /// `list`: the pods a LIST would have shown; `absent`: a pod the cache lacks, so deleted by
    /// that version (a GET of it not made).
    read: &'static str,
}

/// Count one read not older than a version answered by this process's cache.
pub(super) fn answered_by_cache(read: &'static str) {
    BY_CACHE.get_or_create(&CacheLabels { read }).inc();
}

/// Register the family in `registry`, with the reads the admission and release paths make at 0.
pub fn register(registry: &MetricsRegistry) {
    for (read, kind) in [
        ("get", "Pod"),
        ("get", "Node"),
        ("list", "Pod"),
        ("list_since", "Pod"),
    ] {
        for result in RESULTS {
            let _ = READS.get_or_create(&ReadLabels { read, kind, result });
        }
    }
    registry.register(
        "volguard_live_reads",
        "Live reads of the apiserver (never a cache) by read (get, list, list_since: not older than a version), kind and result (found, missing, \
         timeout: no answer by the reader's deadline, throttled: 429 after the client's retries, refused, \
         error, decode)",
        READS.clone(),
    );
    for read in ["list", "absent"] {
        let _ = BY_CACHE.get_or_create(&CacheLabels { read });
    }
    registry.register(
        "volguard_cache_since_reads",
        "Pod reads not older than a version that this process's own cache answered, its watch having applied \
         that version, by read (list: the pods a LIST shows; absent: a pod the cache lacks, so deleted): no request made",
        BY_CACHE.clone(),
    );
}

/// Count one answered read.
pub(super) fn count<T>(read: &'static str, kind: &'static str, fact: &Fact<T>) {
    let result = match fact {
        Fact::Found(_) => "found",
        Fact::Missing => "missing",
        Fact::Unknown(e) => result_of(e),
    };
    READS
        .get_or_create(&ReadLabels { read, kind, result })
        .inc();
}

fn result_of(e: &ReadError) -> &'static str {
    match e {
        ReadError::Timeout { .. } => "timeout",
        ReadError::Refused { code: 429, .. } => "throttled",
        ReadError::Refused { .. } => "refused",
        ReadError::Decode { .. } => "decode",
        // A cache read of a kind not watched is never a live read; counted as an error if one
        // ever were.
        ReadError::Api { .. } | ReadError::GoneUnrecorded { .. } | ReadError::NotWatched { .. } => {
            "error"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(read: &'static str, kind: &'static str, result: &'static str) -> u64 {
        READS
            .get_or_create(&ReadLabels { read, kind, result })
            .get()
    }

    #[test]
    fn each_answer_is_counted_under_its_result() {
        let refused = |code| ReadError::Refused {
            what: "listing".into(),
            code,
            reason: String::new(),
            message: String::new(),
        };
        // A kind no other test reads, so that the counts are this test's alone.
        let kind = "CountedInTests";
        let cases: [(Fact<()>, &str); 7] = [
            (Fact::Found(()), "found"),
            (Fact::Missing, "missing"),
            (
                Fact::Unknown(ReadError::Timeout { what: "x".into() }),
                "timeout",
            ),
            (Fact::Unknown(refused(429)), "throttled"),
            (Fact::Unknown(refused(403)), "refused"),
            (
                Fact::Unknown(ReadError::Api {
                    what: "x".into(),
                    message: "connection reset".into(),
                }),
                "error",
            ),
            (
                Fact::Unknown(ReadError::Decode {
                    what: "x".into(),
                    message: "bad".into(),
                }),
                "decode",
            ),
        ];
        for (fact, result) in &cases {
            let before = counted("list", kind, result);
            count("list", kind, fact);
            assert_eq!(counted("list", kind, result), before + 1, "{result}");
        }
        assert_eq!(
            cases.iter().map(|(_, r)| *r).collect::<Vec<_>>(),
            RESULTS.to_vec(),
            "every result a read can have is precreated"
        );
    }

    #[test]
    fn the_family_is_exported_with_the_decisions_reads_at_zero() {
        let r = MetricsRegistry::default();
        register(&r);
        let text = r.render_prometheus();
        for result in RESULTS {
            assert!(
                text.contains(&format!(
                    "volguard_live_reads_total{{read=\"list\",kind=\"Pod\",result=\"{result}\"}}"
                )),
                "{result}: {text}"
            );
        }
    }
}
