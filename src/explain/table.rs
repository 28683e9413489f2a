//! `explain pvc|pv` as a table, and every explanation in the format asked for.

use super::*;

/// The table form: one fact per line, for people.
pub fn table(e: &Explanation) -> String {
    let mut out = String::new();
    let id = if e.namespace.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.namespace, e.name)
    };
    out.push_str(&format!("{} {id}\n", e.kind));
    out.push_str(&format!("  phase:        {}\n", e.phase));
    out.push_str(&format!(
        "  deletion:     {}\n",
        e.deleting_since
            .as_deref()
            .map_or("not requested".to_string(), |t| format!("requested at {t}"))
    ));
    if let Some(b) = &e.bound_to {
        out.push_str(&format!("  bound to:     {b}\n"));
    }
    out.push_str("  finalizers:\n");
    if e.finalizers.is_empty() {
        out.push_str("    (none)\n");
    }
    for f in &e.finalizers {
        out.push_str(&format!("    {}  (removed by {})\n", f.name, f.owner));
    }
    if e.kind == "PersistentVolumeClaim" {
        claim_lines(e, &mut out);
    }
    for w in &e.partitions {
        out.push_str(&format!(
            "  partition:    pod {} waits on node {}: incident {} ({}){}\n",
            w.pod,
            w.node,
            w.incident,
            w.phase,
            w.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    attachment_lines(&e.volume_attachments, &mut out);
    if !e.not_read.is_empty() {
        out.push_str(&format!(
            "  not read:     {}: you may not read them; shown without them\n",
            e.not_read.join(", ")
        ));
    }
    out.push_str(&format!("  next:         {}\n", e.next));
    out
}

/// A claim's users, unused-since and RWO lock.
fn claim_lines(e: &Explanation, out: &mut String) {
    // "Used" as `report unused` counts it: by a pod that has not finished.
    out.push_str("  used by:\n");
    let (done, running): (Vec<_>, Vec<_>) = e.blocking_pods.iter().partition(|p| p.finished);
    if running.is_empty() {
        out.push_str("    (no running pod)\n");
    }
    for p in running {
        out.push_str(&format!(
            "    {} ({} on node {})\n",
            p.name, p.phase, p.node
        ));
    }
    if !done.is_empty() {
        out.push_str("  finished pods still naming it (they hold a deletion):\n");
        for p in done {
            out.push_str(&format!(
                "    {} ({} on node {}): delete pod {} to release it\n",
                p.name, p.phase, p.node, p.name
            ));
        }
    }
    out.push_str(&format!(
        "  unused since: {}\n",
        match (&e.unused_since, e.unused_since_source) {
            (Some(t), SinceSource::Condition) => format!("{t} (Unused condition)"),
            (Some(t), SinceSource::Created) => format!(
                "{t} (created then; its volguard.io/unused-since predates the claim, e.g. restored from a backup)"
            ),
            (Some(t), _) => format!("{t} (volguard.io/unused-since)"),
            (None, _) if e.blocking_pods.iter().any(|p| !p.finished) => "(in use)".into(),
            (None, _) => "not yet observed (the controller marks it once it has seen it unused for --unused-grace, 10 minutes by default)".into(),
        }
    ));
    out.push_str(&format!(
        "  rwo lock:     {}\n",
        match &e.rwo_lock {
            // A bind's lock whose pod no longer uses the claim holds nobody back (rules.md §2f).
            Some(l)
                if l.via == Some(crate::rules::rwo_lock::Via::Bind)
                    && !e
                        .blocking_pods
                        .iter()
                        .any(|p| p.name == l.pod && !p.finished) =>
            {
                format!(
                    "node {} (pod {}, since {}): that pod no longer uses the claim, so it holds nobody back; the \
                     next placement takes it over, and the controller removes it within 10 minutes, or its grace if longer (volguard.io/rwo-lock)",
                    l.node, l.pod, l.at
                )
            }
            Some(l) => format!(
                "node {} (pod {}, since {}): pods on other nodes wait until it ends (volguard.io/rwo-lock)",
                l.node, l.pod, l.at
            ),
            None => "none".into(),
        }
    ));
}

fn attachment_lines(attachments: &[Attachment], out: &mut String) {
    out.push_str("  volume attachments:\n");
    if attachments.is_empty() {
        out.push_str("    (none)\n");
    }
    for a in attachments {
        out.push_str(&format!(
            "    {} on node {} ({}{})\n",
            a.name,
            a.node,
            if a.attached { "attached" } else { "detached" },
            if a.terminating { ", being deleted" } else { "" }
        ));
    }
}

/// One explanation in the format asked for (`name`: what `-o name` prints).
pub(super) fn render<T: Serialize>(
    e: &T,
    format: crate::runtime::flags::Format,
    table: fn(&T) -> String,
    name: String,
) -> anyhow::Result<String> {
    use crate::runtime::flags::Format;
    Ok(match format {
        Format::Table | Format::Wide => table(e),
        Format::Name => name + "\n",
        Format::Json => serde_json::to_string_pretty(e)? + "\n",
        Format::Yaml => serde_yaml::to_string(e)?,
    })
}
