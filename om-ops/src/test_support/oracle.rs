//! Test helpers (compiled for tests only): the PyTorch oracle data of `testdata/ops/`,
//! written by `tools/oracle_*.py`, and the scaled-error comparison
//! `max|ours − torch| / max|torch|`.

use om_core::compute::{Compute, Mode};
use om_core::{DType, Tensor};
use std::collections::BTreeMap;

/// Largest accepted scaled error of a forward value or gradient against PyTorch.
pub const TOLERANCE: f64 = 1e-5;

/// The named tensors of an oracle file of `testdata/ops/`.
pub struct Oracle(BTreeMap<String, Tensor>);

impl Oracle {
    /// Reads the oracle file of the normalisation, embedding and loss operators.
    pub fn load() -> Oracle {
        Oracle::load_file("norm_loss", "tools/oracle_norm_loss.py")
    }

    /// Reads `testdata/ops/<file>.safetensors`, written by the script `tool`.
    pub fn load_file(file: &str, tool: &str) -> Oracle {
        let path = format!("{}/../testdata/ops/{file}.safetensors", env!("CARGO_MANIFEST_DIR"));
        Oracle(om_core::io::load(&path).unwrap_or_else(|e| panic!("{e} (regenerate with {tool})")))
    }

    /// Whether the file has a tensor `name`.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The names of the stored tensors.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// A fresh copy of tensor `name`: `f32` tensors are new leaves requiring gradients,
    /// `i32` tensors (ids, targets) are returned as stored.
    pub fn get(&self, name: &str) -> Tensor {
        let t = self.0.get(name).unwrap_or_else(|| panic!("`{name}` is not in the oracle file"));
        match t.dtype() {
            DType::F32 => Tensor::from_vec(t.to_vec(), t.shape()).and_then(Tensor::requires_grad).unwrap(),
            DType::I32 => t.clone(),
        }
    }

    /// Backpropagates `sum(y · <name>_r)` and compares each input's gradient with
    /// `<name>_g<input>`.
    pub fn check_grads(&self, name: &str, y: &Tensor, inputs: &[(&str, &Tensor)]) {
        let r = self.get(&format!("{name}_r")).detach();
        for (_, t) in inputs {
            t.clear_grad();
        }
        let loss = crate::sum(&crate::mul(y, &r).unwrap(), None, false).unwrap();
        loss.backward().unwrap();
        for (n, t) in inputs {
            let key = format!("{name}_g{n}");
            let g = t.grad().unwrap_or_else(|| panic!("no gradient for {key}"));
            assert_close(&key, &g, &self.get(&key));
        }
    }
}

/// The scaled error `max|ours − want| / max|want|` (shapes must agree).
pub fn scaled_error(ours: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(ours.shape(), want.shape(), "shapes differ");
    let (a, b) = (ours.to_vec(), want.to_vec());
    let diff = a.iter().zip(&b).map(|(&x, &y)| (x as f64 - y as f64).abs()).fold(0.0, f64::max);
    let scale = b.iter().map(|&y| (y as f64).abs()).fold(0.0, f64::max);
    if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}

/// Asserts the scaled error is within [`TOLERANCE`] and prints it (visible with
/// `--nocapture`).
pub fn assert_close(name: &str, ours: &Tensor, want: &Tensor) {
    let e = scaled_error(ours, want);
    println!("oracle {name} [{}]: scaled error {e:.2e}", Compute::mode());
    assert!(e <= TOLERANCE, "{name}: scaled error {e:.3e} > {TOLERANCE:e} in {} mode", Compute::mode());
}

/// Runs `f` in fast mode and then in exact mode (the mode is per thread).
pub fn both_modes(f: impl Fn()) {
    for mode in [Mode::Fast, Mode::Exact] {
        Compute::set_mode(mode);
        f();
    }
    Compute::set_mode(Mode::Fast);
}
