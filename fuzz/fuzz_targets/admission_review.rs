//! AdmissionReview decoding and dispatch: any bytes either give a precise decode error or an
//! AdmissionReview answer echoing the uid; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use volguard::admission::{self, Admission, Endpoint};
use volguard::state::{Store, View, loader};

fn admission() -> &'static (tokio::runtime::Runtime, Admission) {
    static A: OnceLock<(tokio::runtime::Runtime, Admission)> = OnceLock::new();
    A.get_or_init(|| {
        let store = Store::default();
        let text = include_str!("../../manifests/examples/state.yaml");
        loader::load_str(text, &store).expect("example state loads");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let a = Admission::new(View::file(Arc::new(store)), Default::default(), vec![]);
        (rt, a)
    })
}

fuzz_target!(|data: &[u8]| {
    let (rt, a) = admission();
    let Ok(req) = admission::decode(data) else {
        return;
    };
    // What the server reads beside the decision: the object's UID (Events) and, on a DELETE,
    // its version (a second call of one request is counted once).
    let _ = req.object_uid();
    if let Some((uid, rv)) = req.deleted_version() {
        assert!(!uid.is_empty() && !rv.is_empty());
    }
    for ep in [Endpoint::Mutate, Endpoint::Validate] {
        let v = rt.block_on(a.decide(ep, &req, std::time::Duration::from_secs(2)));
        let out = admission::encode(&req.uid, &v.decision, v.rule);
        let r: serde_json::Value = serde_json::from_slice(&out).expect("response is JSON");
        assert_eq!(r["response"]["uid"].as_str(), Some(&*req.uid));
        assert_eq!(r["response"]["allowed"].as_bool(), Some(v.decision.allowed));
    }
});
