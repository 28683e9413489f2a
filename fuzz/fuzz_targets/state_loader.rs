//! The `--state` loader: any text loads or gives an error; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let store = volguard::state::Store::default();
    if let Ok(summary) = volguard::state::loader::load_str(text, &store) {
        assert!(store.pvcs.len() <= summary.pvcs && store.pods.len() <= summary.pods);
    }
});
