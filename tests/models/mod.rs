//! The five oracle models of spec section 6 on the eager ops, loading their weights, inputs
//! and constants from `testdata/autograd/<model>.safetensors` (written by
//! `tools/autograd_oracle.py` and `tools/rnn_oracle.py`). Used by `oracle_models.rs`
//! (agreement with PyTorch) and `exact_hashes.rs` (pinned exact-mode bits).
//!
//! Key convention of the files: `p.<name>` parameters and `x.<name>` float inputs (leaves
//! requiring gradients), `c.<name>` constants, `loss`, `out.<name>` extra outputs and
//! `grad.<key>` PyTorch's gradient of `loss` for every `p.`/`x.` key.

#![allow(dead_code)]

use om_core::{DType, Result, Tensor};
use om_ops as ops;
use std::collections::BTreeMap;

/// The oracle models, in the order the tests report them.
pub const MODELS: [&str; 5] = ["convnet", "encoder", "crnn", "gru", "decoder"];

/// Gradients that are zero in theory: the bias of the convolution feeding the batch norm,
/// and the key biases of attention (softmax is invariant to a per-row constant).
pub fn zero_in_theory(model: &str, key: &str) -> bool {
    match model {
        "convnet" => key == "p.conv1_b",
        "encoder" => key.starts_with("p.l") && key.ends_with(".k_b"),
        _ => false,
    }
}

/// The kind of a leaf, for the per-kind error report.
pub fn kind(key: &str) -> &'static str {
    let name = key.split_once('.').map_or(key, |(_, n)| n);
    if key.starts_with("x.") {
        "input"
    } else if name.starts_with("lstm.") || name.starts_with("gru.") {
        "recurrent"
    } else if name.starts_with("bn_") || name.contains(".ln") {
        "norm"
    } else if name == "embed" {
        "embedding"
    } else if name.ends_with("_b") {
        "bias"
    } else {
        "weight"
    }
}

/// One oracle model: the stored tensors and fresh leaves for its `p.`/`x.` keys.
pub struct Model {
    /// The model's name (the file stem).
    pub name: &'static str,
    /// Everything stored in the file.
    pub data: BTreeMap<String, Tensor>,
    /// Fresh copies of the `p.`/`x.` tensors, requiring gradients.
    pub leaves: BTreeMap<String, Tensor>,
}

impl Model {
    /// Reads `testdata/autograd/<name>.safetensors`.
    pub fn load(name: &'static str) -> Model {
        let path = format!("{}/../testdata/autograd/{name}.safetensors", env!("CARGO_MANIFEST_DIR"));
        let data =
            om_core::io::load(&path).unwrap_or_else(|e| panic!("{e} (regenerate with tools/autograd_oracle.py or tools/rnn_oracle.py)"));
        let leaves = data
            .iter()
            .filter(|(k, _)| k.starts_with("p.") || k.starts_with("x."))
            .map(|(k, t)| (k.clone(), Tensor::from_vec(t.to_vec(), t.shape()).and_then(Tensor::requires_grad).unwrap()))
            .collect();
        Model { name, data, leaves }
    }

    /// The leaf `key` (`p.…` or `x.…`).
    pub fn leaf(&self, key: &str) -> &Tensor {
        self.leaves.get(key).unwrap_or_else(|| panic!("{}: no leaf `{key}`", self.name))
    }

    /// The stored tensor `key` (constants, expected values).
    pub fn stored(&self, key: &str) -> &Tensor {
        self.data.get(key).unwrap_or_else(|| panic!("{}: `{key}` is not in the file", self.name))
    }

    /// The forward pass up to the scalar loss.
    pub fn forward(&self) -> Result<Tensor> {
        match self.name {
            "convnet" => self.convnet(),
            "encoder" => self.encoder(),
            "crnn" => {
                let lp = self.crnn_log_probs()?;
                let c = |k| self.stored(k);
                ops::ctc_loss(&lp, c("c.targets"), c("c.input_lengths"), c("c.target_lengths"), 0, ops::Reduction::Mean, false)
            }
            "gru" => self.gru(),
            "decoder" => self.decoder(),
            other => panic!("unknown oracle model {other}"),
        }
    }

    /// One training step: clears the gradients, runs forward and backward, returns the loss.
    pub fn step(&self) -> Result<Tensor> {
        for t in self.leaves.values() {
            t.clear_grad();
        }
        let loss = self.forward()?;
        loss.backward()?;
        Ok(loss)
    }

    /// The gradient of every leaf after [`Model::step`], in key order.
    pub fn grads(&self) -> Vec<(&str, Tensor)> {
        self.leaves.iter().map(|(k, t)| (k.as_str(), t.grad().unwrap_or_else(|| panic!("{}: no gradient for {k}", self.name)))).collect()
    }

    fn p(&self, name: &str) -> &Tensor {
        self.leaf(&format!("p.{name}"))
    }

    /// `linear(x, p.<name>_w, p.<name>_b)`.
    fn lin(&self, x: &Tensor, name: &str) -> Result<Tensor> {
        ops::linear(x, self.p(&format!("{name}_w")), Some(self.p(&format!("{name}_b"))))
    }

    /// The weights of a PyTorch LSTM/GRU stack `p.<prefix>.weight_ih_l0[_reverse]`, … in
    /// PyTorch's order (per layer, forward then reverse).
    fn rnn_weights(&self, prefix: &str, layers: usize) -> Vec<ops::RnnWeights> {
        let mut out = Vec::new();
        for l in 0..layers {
            for dir in ["", "_reverse"] {
                let get = |w: &str| self.p(&format!("{prefix}.{w}_l{l}{dir}")).clone();
                out.push(ops::RnnWeights::new(get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")));
            }
        }
        out
    }

    /// conv (bias) → batch norm (training) → ReLU → max pool → grouped dilated conv → ReLU →
    /// avg pool → global average pool → linear → cross-entropy.
    fn convnet(&self) -> Result<Tensor> {
        let x = self.leaf("x.image");
        let h = ops::conv2d(x, self.p("conv1_w"), Some(self.p("conv1_b")), ops::Conv2dOptions::default().padding(1))?;
        let h = ops::batch_norm2d(&h, Some(self.p("bn_gamma")), Some(self.p("bn_beta")), None, None, ops::BatchNormOptions::train())?;
        let h = ops::max_pool2d(&ops::relu(&h)?, 2)?;
        let h = ops::relu(&ops::conv2d(
            &h,
            self.p("conv2_w"),
            Some(self.p("conv2_b")),
            ops::Conv2dOptions::default().padding(2).dilation(2).groups(4),
        )?)?;
        let h = ops::avg_pool2d(&h, ops::Pool2d::new(2).stride(1))?;
        let h = ops::global_avg_pool2d(&h)?; // [N, C, 1, 1]
        let h = ops::reshape(&h, [h.shape()[0] as isize, h.shape()[1] as isize])?;
        ops::cross_entropy(&self.lin(&h, "fc")?, self.stored("c.targets"), None, Default::default())
    }

    /// Embedding → 2 post-norm transformer encoder layers → mean over tokens → linear →
    /// cross-entropy.
    fn encoder(&self) -> Result<Tensor> {
        let ids = self.stored("c.ids");
        let mask = self.stored("c.mask");
        let (b, t) = (ids.shape()[0] as isize, ids.shape()[1] as isize);
        let d = self.p("embed").shape()[1] as isize;
        let heads = 2isize;
        let dh = d / heads;
        let scale = (1.0 / (dh as f64).sqrt()) as f32;
        let split = |y: Tensor| ops::permute(&ops::reshape(&y, [b, t, heads, dh])?, [0, 2, 1, 3]);
        let mut x = ops::embedding(self.p("embed"), ids, None)?;
        for l in 0..2 {
            let q = split(self.lin(&x, &format!("l{l}.q"))?)?;
            let k = split(self.lin(&x, &format!("l{l}.k"))?)?;
            let v = split(self.lin(&x, &format!("l{l}.v"))?)?;
            let a = ops::attention(&q, &k, &v, Some(mask), scale)?;
            let a = ops::reshape(&ops::contiguous(&ops::permute(&a, [0, 2, 1, 3])?)?, [b, t, d])?;
            let a = self.lin(&a, &format!("l{l}.o"))?;
            let ln =
                |y: &Tensor, n: &str| ops::layer_norm(y, Some(self.p(&format!("l{l}.{n}_g"))), Some(self.p(&format!("l{l}.{n}_b"))), 1e-5);
            x = ln(&ops::add(&x, &a)?, "ln1")?;
            let f = ops::gelu(&self.lin(&x, &format!("l{l}.ff1"))?, ops::GeluForm::Erf)?;
            let f = self.lin(&f, &format!("l{l}.ff2"))?;
            x = ln(&ops::add(&x, &f)?, "ln2")?;
        }
        let pooled = ops::mean(&x, Some(1), false)?;
        ops::cross_entropy(&self.lin(&pooled, "head")?, self.stored("c.targets"), None, Default::default())
    }

    /// The CRNN up to the log-probabilities `[W, B, classes]`: two conv-relu-pool stages,
    /// height collapsed into channels, 2-layer bidirectional LSTM, linear, log-softmax.
    pub fn crnn_log_probs(&self) -> Result<Tensor> {
        let x = self.leaf("x.image");
        let h = ops::relu(&ops::conv2d(x, self.p("conv1_w"), Some(self.p("conv1_b")), ops::Conv2dOptions::default().padding(1))?)?;
        let h = ops::max_pool2d(&h, 2)?;
        let h = ops::relu(&ops::conv2d(&h, self.p("conv2_w"), Some(self.p("conv2_b")), ops::Conv2dOptions::default().padding(1))?)?;
        let h = ops::max_pool2d(&h, [2, 1])?;
        let s: Vec<isize> = h.shape().iter().map(|&v| v as isize).collect();
        let seq = ops::reshape(&ops::permute(&h, [3, 0, 1, 2])?, [s[3], s[0], s[1] * s[2]])?;
        let cfg = ops::RnnConfig { layers: 2, bidirectional: true, batch_first: false };
        let r = ops::lstm(&seq, None, None, &self.rnn_weights("lstm", 2), cfg)?;
        ops::log_softmax(&self.lin(&r.y, "fc")?, -1)
    }

    /// Bidirectional 2-layer batch-first GRU with initial states; `sum(y·ry) + sum(h_n·rh)`.
    fn gru(&self) -> Result<Tensor> {
        let cfg = ops::RnnConfig { layers: 2, bidirectional: true, batch_first: true };
        let r = ops::gru(self.leaf("x.seq"), Some(self.leaf("x.h0")), &self.rnn_weights("gru", 2), cfg)?;
        let a = ops::sum(&ops::mul(&r.y, self.stored("c.ry"))?, None, false)?;
        ops::add(&a, &ops::sum(&ops::mul(&r.h_n, self.stored("c.rh"))?, None, false)?)
    }

    /// conv → ReLU → transposed conv (stride 2, output padding, groups) → ReLU → transposed
    /// conv → nearest, bilinear, bilinear-align-corners resizes; `sum(y·r) + sum(y²)`.
    fn decoder(&self) -> Result<Tensor> {
        let h =
            ops::relu(&ops::conv2d(self.leaf("x.z"), self.p("conv_w"), Some(self.p("conv_b")), ops::Conv2dOptions::default().padding(1))?)?;
        let h = ops::relu(&ops::conv_transpose2d(
            &h,
            self.p("up1_w"),
            Some(self.p("up1_b")),
            ops::ConvTranspose2dOptions::default().stride(2).padding(1).output_padding(1).groups(2),
        )?)?;
        let h = ops::conv_transpose2d(&h, self.p("up2_w"), Some(self.p("up2_b")), ops::ConvTranspose2dOptions::default())?;
        let h = ops::resize2d(&h, [7, 9])?;
        let h = ops::resize2d(&h, ops::Interpolate::size([13, 10]).mode(ops::ResizeMode::Bilinear))?;
        let h = ops::resize2d(&h, ops::Interpolate::size([6, 8]).mode(ops::ResizeMode::Bilinear).align_corners(true))?;
        let a = ops::sum(&ops::mul(&h, self.stored("c.r"))?, None, false)?;
        ops::add(&a, &ops::sum(&ops::mul(&h, &h)?, None, false)?)
    }
}

/// FNV-1a over the little-endian bytes of `values`' bits.
pub fn fnv(hash: &mut u64, values: &[f32]) {
    for v in values {
        for byte in v.to_bits().to_le_bytes() {
            *hash ^= byte as u64;
            *hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
}

/// The FNV-1a hash of the loss and every gradient (in key order) of one training step of
/// `model` under the current compute settings.
pub fn step_hash(model: &'static str) -> u64 {
    let m = Model::load(model);
    let loss = m.step().unwrap_or_else(|e| panic!("{model}: {e}"));
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    fnv(&mut hash, &loss.to_vec());
    for (_, g) in m.grads() {
        assert_eq!(g.dtype(), DType::F32);
        fnv(&mut hash, &g.to_vec());
    }
    hash
}
