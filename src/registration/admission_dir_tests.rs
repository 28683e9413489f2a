//! Unit tests of `src/registration/admission_dir.rs`: what KEP-5793's loader demands of the
//! files (kube-apiserver 1.37's `pkg/admission/plugin/{webhook,policy}/manifest/loader`).

use super::*;

fn options() -> Options {
    let mut params = Inlined::defaults("vg");
    params.force_delete_users = vec![
        "system:serviceaccount:capi:o'brien".into(),
        "system:serviceaccount:ops:remediator".into(),
    ];
    Options {
        webhook_url: "https://10.0.0.7:8443/".into(),
        ca_pem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(),
        namespace: "vg".into(),
        webhook_kubeconfig: None,
        params,
        allow: crate::registration::webhooks::AllowList {
            users: vec!["system:serviceaccount:capi:o'brien".into()],
            groups: vec![],
        },
    }
}

#[test]
fn webhooks_post_to_urls_with_their_ca_and_static_names() {
    let docs = documents(&options()).expect("documents");
    let mut entries = 0;
    for (dir, objects) in &docs {
        for o in objects {
            let name = o["metadata"]["name"].as_str().expect("name");
            assert!(name.ends_with(".static.k8s.io"), "{dir}: {name}");
            for w in o["webhooks"].as_array().into_iter().flatten() {
                entries += 1;
                let cc = &w["clientConfig"];
                assert!(cc.get("service").is_none(), "{}", w["name"]);
                let url = cc["url"].as_str().expect("url");
                assert!(url.starts_with("https://10.0.0.7:8443/"), "{url}");
                assert!(!url.contains("8443//"), "{url}");
                assert!(!cc["caBundle"].as_str().unwrap_or_default().is_empty());
                // The namespace of the options, not the generated manifests'.
                let text = w.to_string();
                assert!(!text.contains("volguard-system"), "{text}");
            }
        }
    }
    assert_eq!(entries, super::super::webhooks::entries().count());
}

#[test]
fn the_force_delete_entries_skip_the_webhooks_allow_list_only() {
    // The webhook's allow-list is answered in the apiserver by the entries of its rule (rules.md
    // §2d row 7); whom only the policies trust (a remediator, whose force deletes the webhook
    // still judges and records) is not.
    let docs = documents(&options()).expect("documents");
    let mut skipping = Vec::new();
    for (_, objects) in &docs {
        for o in objects {
            for w in o["webhooks"].as_array().into_iter().flatten() {
                let conditions = w["matchConditions"].as_array().cloned().unwrap_or_default();
                if let Some(c) = conditions.iter().find(|c| c["name"] == "not-allow-listed") {
                    let e = c["expression"].as_str().unwrap_or_default();
                    assert!(
                        e.contains("['system:serviceaccount:capi:o\\'brien']"),
                        "{e}"
                    );
                    assert!(!e.contains("remediator"), "{e}");
                    skipping.push(w["name"].as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    skipping.sort();
    assert_eq!(
        skipping,
        ["eviction.volguard.io", "force-delete.volguard.io"]
    );
}

#[test]
fn policies_take_no_parameters_and_bindings_name_static_policies() {
    let docs = documents(&options()).expect("documents");
    let mut policies = std::collections::BTreeSet::new();
    let mut bound = Vec::new();
    for (dir, objects) in &docs {
        if !dir.ends_with("policies") {
            continue;
        }
        for o in objects {
            let kind = o["kind"].as_str().unwrap_or_default();
            let text = o.to_string();
            assert!(!text.contains("params"), "{kind} reads a parameter: {text}");
            assert!(o["spec"].get("paramKind").is_none() && o["spec"].get("paramRef").is_none());
            if kind.ends_with("Binding") {
                bound.push(
                    o["spec"]["policyName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            } else {
                policies.insert(
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
    }
    assert_eq!(policies.len(), super::super::policies::POLICIES.len());
    for b in bound {
        assert!(policies.contains(&b), "binding names {b}");
    }
}

#[test]
fn inlined_parameters_are_literals_quoted_for_cel() {
    let p = options().params;
    let e = p
        .inline(
            super::super::policies::POLICIES[3].object()["spec"]["validations"][0]["expression"]
                .as_str()
                .unwrap_or_default(),
        )
        .expect("inlined");
    assert!(
        e.contains(
            "['system:serviceaccount:capi:o\\'brien', 'system:serviceaccount:ops:remediator']"
        ),
        "{e}"
    );
    assert!(p.inline("params.data['unknown']").is_none());
}

#[test]
fn the_configuration_names_each_directory_absolutely() {
    let dir = std::env::temp_dir().join(format!("volguard-admission-dir-{}", std::process::id()));
    let written = write(&dir, &options()).expect("write");
    assert_eq!(written.len(), 5);
    let text = std::fs::read_to_string(dir.join("admission-configuration.yaml")).expect("read");
    let v: Value = serde_yaml::from_str(&text).expect("yaml");
    let plugins = v["plugins"].as_array().expect("plugins");
    assert_eq!(plugins.len(), 4);
    for p in plugins {
        let d = p["configuration"]["staticManifestsDir"]
            .as_str()
            .expect("dir");
        assert!(
            Path::new(d).is_absolute() && Path::new(d).join("volguard.yaml").is_file(),
            "{d}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut bad = options();
    bad.webhook_url = "http://x".into();
    assert!(matches!(documents(&bad), Err(AdmissionDirError::Url(_))));
}
