//! Who volguard is in the cluster: its namespace and its service accounts' usernames.

/// The namespace volguard is installed in: `$POD_NAMESPACE` (the manifests and the chart set it
/// from the downward API), else the in-cluster ServiceAccount's, else `volguard-system`. Nothing
/// else names it, so an install into any namespace needs no flag.
pub fn install_namespace() -> String {
    const SA_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string(SA_NAMESPACE).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "volguard-system".to_string())
}

/// The webhook's own username (it writes the RWO lock): its ServiceAccount in the namespace
/// volguard runs in, or `VOLGUARD_WEBHOOK_USER`.
pub fn webhook_user() -> String {
    std::env::var("VOLGUARD_WEBHOOK_USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| {
            format!(
                "system:serviceaccount:{}:volguard-webhook",
                install_namespace()
            )
        })
}

/// The controller's username when `--controller-user` is not given.
pub fn controller_users(given: &[String]) -> Vec<String> {
    if given.is_empty() {
        vec![format!(
            "system:serviceaccount:{}:volguard-controller",
            install_namespace()
        )]
    } else {
        given.to_vec()
    }
}

/// This process as Leases and Events name it: $POD_NAME or the hostname, plus the process id.
pub fn process_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "volguard".into());
    format!("{host}_{}", std::process::id())
}
