//! The `--state` loader: any text loads or gives an error; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let store = std::sync::Arc::new(volguard::state::Store::default());
    if let Ok(summary) = volguard::state::loader::load_str(text, &store) {
        let view = volguard::state::View::file(store);
        let pvcs = view.sweep::<volguard::model::Pvc>(None).len();
        let pods = view.sweep::<volguard::model::Pod>(None).len();
        assert!(pvcs <= summary.pvcs && pods <= summary.pods);
    }
});
