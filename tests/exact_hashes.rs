//! Exact mode gives the same bits on every kernel path and thread count: the FNV-1a hash of
//! the loss and of every gradient bit of one training step of each oracle model
//! (`tests/models/mod.rs`) is pinned here, and must come out at 1, 2, 3 and 8 threads on every
//! path the CPU supports. Fast mode must be identical across thread counts (not pinned).
//! A change of these constants is a change of exact-mode numerics: say so in the commit.

mod models;

use models::{step_hash, MODELS};
use om_core::compute::{Compute, KernelPath, Mode, Settings};

/// The pinned exact-mode hashes, in the order of [`MODELS`].
const PINNED: [(&str, u64); 5] = [
    ("convnet", 0xc832_186c_2192_cf25),
    ("encoder", 0xc273_1b09_b647_9c3f),
    ("crnn", 0x146f_78dd_64d0_40eb),
    ("gru", 0x281a_c4ed_a766_d761),
    ("decoder", 0xbfaf_33ce_6aac_5f66),
];

const THREADS: [usize; 4] = [1, 2, 3, 8];

fn hash_with(model: &'static str, mode: Mode, threads: usize, path: KernelPath) -> u64 {
    Compute::with(Settings { mode, threads, path }, || step_hash(model))
}

#[test]
fn exact_mode_hashes_are_pinned_on_every_path_and_thread_count() {
    let mut failures = Vec::new();
    for (model, (pinned_name, pinned)) in MODELS.iter().zip(PINNED) {
        assert_eq!(*model, pinned_name);
        let scalar = hash_with(model, Mode::Exact, 1, KernelPath::Scalar);
        println!("{model}: exact-mode hash {scalar:#018x}");
        if scalar != pinned {
            failures.push(format!("{model}: hash {scalar:#018x} on the scalar path at 1 thread, pinned {pinned:#018x}"));
        }
        for path in KernelPath::supported() {
            for threads in THREADS {
                let h = hash_with(model, Mode::Exact, threads, path);
                if h != pinned {
                    failures.push(format!("{model}: hash {h:#018x} on {path} at {threads} threads, pinned {pinned:#018x}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fast_mode_hashes_are_identical_across_thread_counts() {
    for model in MODELS {
        for path in KernelPath::supported() {
            let one = hash_with(model, Mode::Fast, 1, path);
            for threads in &THREADS[1..] {
                assert_eq!(hash_with(model, Mode::Fast, *threads, path), one, "{model}: fast mode on {path} differs at {threads} threads");
            }
        }
    }
}
