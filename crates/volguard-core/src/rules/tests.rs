//! Unit tests of `src/rules/mod.rs`.

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir` (relative to the crate), with its text.
fn sources(dir: &str) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root().join(dir)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("source dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let body = std::fs::read_to_string(&p).expect("read");
                out.push((p, body));
            }
        }
    }
    out
}

/// rules.md §8 "one function reads a proof": a proof's key is spelled in `rules/proof/keys.rs`
/// alone, so no guard can read the annotation around `proof::Reader::read` (tests may spell the
/// wire format: they check it). And no code outside `rules/proof/` asks an object for a proof's
/// annotation through `Key::annotation`.
#[test]
fn proof_keys_are_spelled_once() {
    use super::proof::{CONFIRMED_AT, CONFIRMED_BY, Key};
    let keys: Vec<&str> = Key::ALL
        .iter()
        .map(|k| k.annotation())
        .chain([CONFIRMED_BY, CONFIRMED_AT])
        .collect();
    let proof_dir = root().join("src/rules/proof");
    let mut offenders = Vec::new();
    // This crate's sources and the main crate's (two levels up): no code anywhere reads a key.
    let everywhere = sources("src").into_iter().chain(sources("../../src"));
    assert!(
        root().join("../../src/admission").is_dir(),
        "the main crate's sources are not where this test looks"
    );
    for (p, body) in everywhere {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if p.starts_with(&proof_dir) || name.ends_with("tests.rs") {
            continue;
        }
        for (i, line) in body.lines().enumerate() {
            // Comments (and so clap's help text) may name a key: they read nothing.
            if line.trim_start().starts_with("//") {
                continue;
            }
            let raw_key = keys.iter().any(|k| line.contains(k));
            let raw_read = ["annotation_true(", ".annotation(", "annotations.get("]
                .iter()
                .filter_map(|call| line.split_once(call).map(|(_, arg)| arg))
                .any(|arg| {
                    arg.contains(".annotation()")
                        || arg.starts_with("Key::")
                        || arg.contains("CONFIRMED_")
                });
            if raw_key || raw_read {
                offenders.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a proof's key read or spelled outside rules/proof:\n{}",
        offenders.join("\n")
    );
}
