//! A small decoder-only transformer (GPT-style) for character sequences: token and learned
//! position embeddings, pre-norm blocks (LayerNorm → causal multi-head self-attention →
//! residual, LayerNorm → GELU MLP → residual), a final LayerNorm and a linear head over
//! the vocabulary; plus greedy decoding. `om train --task add` trains one on sums.

use om_core::{no_grad, DType, Error, Result, Tensor};
use om_ops::nn::{causal_mask, Embedding, Forward, LayerNorm, Linear, Module, MultiheadAttention};
use om_ops::{self as ops, GeluForm};

/// The sizes of a [`DecoderOnly`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderConfig {
    /// Tokens of the vocabulary (ids `0..vocab`).
    pub vocab: usize,
    /// The longest sequence (rows of the position embedding).
    pub max_len: usize,
    /// The model width `E`.
    pub dim: usize,
    /// Attention heads (dividing `dim`).
    pub heads: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the MLP's hidden layer (usually `4·dim`).
    pub ff: usize,
}

/// One pre-norm block: `x + attn(ln1(x))`, then `x + fc2(gelu(fc1(ln2(x))))`.
#[derive(Module)]
struct Block {
    ln1: LayerNorm,
    attn: MultiheadAttention,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

impl Block {
    fn new(c: &DecoderConfig, seed: u64) -> Result<Block> {
        Ok(Block {
            ln1: LayerNorm::new(c.dim)?,
            attn: MultiheadAttention::with_seed(c.dim, c.heads, true, seed)?,
            ln2: LayerNorm::new(c.dim)?,
            fc1: Linear::with_seed(c.dim, c.ff, true, seed + 1)?,
            fc2: Linear::with_seed(c.ff, c.dim, true, seed + 2)?,
        })
    }

    /// `[B, T, E]` → `[B, T, E]`, attending under the additive `mask` `[T, T]`.
    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let h = self.ln1.forward(x)?;
        let x = ops::add(x, &self.attn.forward(&h, &h, &h, Some(mask))?)?;
        let h = ops::gelu(&self.fc1.forward(&self.ln2.forward(&x)?)?, GeluForm::Erf)?;
        ops::add(&x, &self.fc2.forward(&h)?)
    }
}

/// A decoder-only transformer over token ids: `tok` and `pos` embeddings (summed),
/// `layers` pre-norm blocks with causal self-attention ([`causal_mask`]), a final
/// LayerNorm and a linear head to `vocab` logits. Layers are initialised as PyTorch's
/// (`nn.Embedding` N(0, 1), `nn.Linear`, `nn.MultiheadAttention`, `nn.LayerNorm`), from
/// `seed`; parameter names follow the fields (`tok.weight`, `blocks.0.attn.in_proj_weight`,
/// …, `head.weight`).
///
/// # Examples
///
/// ```
/// use om_models::{DecoderConfig, DecoderOnly};
/// use om_core::Tensor;
/// let config = DecoderConfig { vocab: 12, max_len: 16, dim: 32, heads: 4, layers: 2, ff: 128 };
/// let model = DecoderOnly::new(config, 7)?;
/// let ids = Tensor::from_vec_i32(vec![1, 2, 10, 3, 4, 11], &[1, 6])?;
/// assert_eq!(model.forward(&ids)?.shape(), &[1, 6, 12]);
/// // Greedy decoding appends the arg-max token 3 times.
/// let out = model.generate(&[vec![1, 2, 10, 3, 4, 11]], 3)?;
/// assert_eq!(out[0].len(), 3);
/// # Ok::<(), om_core::Error>(())
/// ```
#[derive(Module)]
pub struct DecoderOnly {
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
    #[module(skip)]
    config: DecoderConfig,
}

impl DecoderOnly {
    /// A freshly initialised model of `config`'s sizes, its weights drawn from `seed`.
    pub fn new(config: DecoderConfig, seed: u64) -> Result<DecoderOnly> {
        let c = config;
        if c.vocab == 0 || c.max_len == 0 || c.dim == 0 || c.ff == 0 || c.layers == 0 {
            return Err(Error::argument("DecoderOnly", format!("every size must be at least 1, got {c:?}")));
        }
        let blocks = (0..c.layers).map(|l| Block::new(&c, seed + 10 * (l as u64 + 1))).collect::<Result<Vec<_>>>()?;
        Ok(DecoderOnly {
            tok: Embedding::with_seed(c.vocab, c.dim, None, seed)?,
            pos: Embedding::with_seed(c.max_len, c.dim, None, seed + 1)?,
            blocks,
            ln_f: LayerNorm::new(c.dim)?,
            head: Linear::with_seed(c.dim, c.vocab, true, seed + 2)?,
            config,
        })
    }

    /// The model's sizes.
    pub fn config(&self) -> DecoderConfig {
        self.config
    }

    /// Token ids `[B, T]` (`i32` in `0..vocab`, `1 ≤ T ≤ max_len`) → logits `[B, T, vocab]`;
    /// the logits at position `t` depend on the ids `0..=t` only.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        if ids.dtype() != DType::I32 || ids.rank() != 2 || ids.shape()[1] == 0 || ids.shape()[1] > c.max_len {
            return Err(Error::argument(
                "DecoderOnly",
                format!("ids must be i32 [B, T] with 1 ≤ T ≤ {}, got {:?} {:?}", c.max_len, ids.dtype(), ids.shape()),
            ));
        }
        let t = ids.shape()[1];
        let positions = Tensor::from_vec_i32((0..t as i32).collect(), &[t])?;
        // [B, T, E] + [T, E]
        let mut x = ops::add(&self.tok.forward(ids)?, &self.pos.forward(&positions)?)?;
        let mask = causal_mask(t)?;
        for block in &self.blocks {
            x = block.forward(&x, &mask)?;
        }
        self.head.forward(&self.ln_f.forward(&x)?)
    }

    /// Greedy decoding without gradients: extends every prompt (all of one length `P`,
    /// `P + new_tokens ≤ max_len + 1`) by `new_tokens` tokens, each the arg-max (the first on
    /// a tie) of the logits after the sequence so far. Returns the new tokens of each prompt.
    /// Evaluation mode is the caller's business (this model has no dropout).
    pub fn generate(&self, prompts: &[Vec<i32>], new_tokens: usize) -> Result<Vec<Vec<i32>>> {
        let b = prompts.len();
        let p = prompts.first().map_or(0, Vec::len);
        if p == 0 || prompts.iter().any(|s| s.len() != p) || p + new_tokens > self.config.max_len + 1 {
            return Err(Error::argument(
                "DecoderOnly::generate",
                format!("prompts must be non-empty, of one length, and length + new_tokens ≤ {}", self.config.max_len + 1),
            ));
        }
        let mut seqs: Vec<i32> = prompts.concat();
        let mut out = vec![Vec::with_capacity(new_tokens); b];
        for step in 0..new_tokens {
            let t = p + step;
            let logits = no_grad(|| self.forward(&Tensor::from_vec_i32(seqs.clone(), &[b, t])?))?;
            let last = ops::select(&logits, 1, t as isize - 1)?;
            let next = ops::argmax(&last, -1, false)?.to_vec_i32();
            let mut grown = Vec::with_capacity(b * (t + 1));
            for (s, (&n, o)) in next.iter().zip(out.iter_mut()).enumerate() {
                grown.extend_from_slice(&seqs[s * t..(s + 1) * t]);
                grown.push(n);
                o.push(n);
            }
            seqs = grown;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DecoderOnly {
        DecoderOnly::new(DecoderConfig { vocab: 7, max_len: 6, dim: 8, heads: 2, layers: 2, ff: 16 }, 3).unwrap()
    }

    #[test]
    fn a_position_sees_only_its_past() {
        let m = small();
        let a = Tensor::from_vec_i32(vec![1, 2, 3, 4, 5], &[1, 5]).unwrap();
        let b = Tensor::from_vec_i32(vec![1, 2, 3, 6, 0], &[1, 5]).unwrap();
        let (ya, yb) = (m.forward(&a).unwrap().to_vec(), m.forward(&b).unwrap().to_vec());
        // positions 0..3 (3 · 7 logits) see the same prefix: the same bits
        assert_eq!(ya[..21], yb[..21]);
        assert_ne!(ya[21..28], yb[21..28]);
    }

    #[test]
    fn generate_appends_the_argmax_of_the_last_position() {
        let m = small();
        let prompt = vec![1, 2, 3];
        let out = m.generate(&[prompt.clone(), vec![4, 5, 6]], 3).unwrap();
        assert_eq!(out.len(), 2);
        // the first new token is the arg-max of the last position's logits
        let logits = m.forward(&Tensor::from_vec_i32(prompt.clone(), &[1, 3]).unwrap()).unwrap().to_vec();
        let last = &logits[14..21];
        let best = last.iter().enumerate().fold(0, |b, (i, &v)| if v > last[b] { i } else { b });
        assert_eq!(out[0][0], best as i32);
        // and the next ones extend the sequence so far
        let grown = [prompt, out[0][..2].to_vec()].concat();
        let logits = m.forward(&Tensor::from_vec_i32(grown, &[1, 5]).unwrap()).unwrap().to_vec();
        let last = &logits[28..35];
        let best = last.iter().enumerate().fold(0, |b, (i, &v)| if v > last[b] { i } else { b });
        assert_eq!(out[0][2], best as i32);
    }

    #[test]
    fn bad_sizes_and_ids_are_errors() {
        let m = small();
        assert!(m.forward(&Tensor::from_vec_i32(vec![0; 7], &[1, 7]).unwrap()).unwrap_err().to_string().contains("DecoderOnly"));
        assert!(m.forward(&Tensor::zeros(&[1, 3]).unwrap()).is_err());
        assert!(m.generate(&[vec![1, 2], vec![1]], 1).is_err());
        assert!(m.generate(&[vec![1, 2]], 6).is_err());
        let c = DecoderConfig { vocab: 7, max_len: 6, dim: 8, heads: 3, layers: 1, ff: 16 };
        assert!(DecoderOnly::new(c, 1).is_err());
        assert!(DecoderOnly::new(DecoderConfig { layers: 0, heads: 2, ..c }, 1).is_err());
    }
}
