//! MultiheadAttention over `ops::attention`.

use super::{uniform_param, Forward, Linear, Module};
use om_core::rng::{self, Rng};
use om_core::{Error, Result, Tensor};

/// Multi-head attention (`torch.nn.MultiheadAttention` with `batch_first=True`, equal
/// query/key/value sizes, no dropout, no `add_bias_kv` / `add_zero_attn`).
///
/// Parameters, named and ordered as PyTorch's state dict: `in_proj_weight` `[3E, E]`
/// (the query, key and value projections stacked) from `xavier_uniform_`
/// (`U(±√(6 / 4E))`), `in_proj_bias` `[3E]` zeros, `out_proj.weight` `[E, E]` from
/// `nn.Linear`'s default `U(±1/√E)` and `out_proj.bias` `[E]` zeros (PyTorch's
/// `_reset_parameters` zeroes both biases). Without `bias` neither bias exists. Both
/// weights are drawn from one generator seeded with one draw of the default stream (or the
/// `seed` of [`MultiheadAttention::with_seed`]), `in_proj_weight` first.
///
/// Unlike PyTorch, `bias` has no default (PyTorch's is `True`) and the inputs are always
/// batch-first (PyTorch's default is `batch_first=False`, `[T, B, E]`).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{Module, MultiheadAttention};
/// use om_ops::Tensor;
/// // nn.MultiheadAttention(16, 4, batch_first=True)
/// let mha = MultiheadAttention::new(16, 4, true)?;
/// let q = Tensor::randn(&[2, 5, 16])?;
/// let kv = Tensor::randn(&[2, 7, 16])?;
/// assert_eq!(mha.forward(&q, &kv, &kv, None)?.shape(), &[2, 5, 16]);
/// // A causal mask [Tq, Tk] for self-attention: −∞ above the diagonal.
/// let mask: Vec<f32> = (0..25).map(|i| if i % 5 > i / 5 { f32::NEG_INFINITY } else { 0.0 }).collect();
/// let mask = Tensor::from_vec(mask, &[5, 5])?;
/// assert_eq!(mha.forward(&q, &q, &q, Some(&mask))?.shape(), &[2, 5, 16]);
/// let names: Vec<String> = mha.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
/// assert!(MultiheadAttention::new(10, 4, true).is_err()); // 4 does not divide 10
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Module)]
pub struct MultiheadAttention {
    /// `[3·embed_dim, embed_dim]`: rows `0..E` project the query, `E..2E` the key,
    /// `2E..3E` the value.
    #[module(param)]
    pub in_proj_weight: Tensor,
    /// `[3·embed_dim]`, if the layer has biases.
    #[module(param)]
    pub in_proj_bias: Option<Tensor>,
    /// The output projection `E → E`.
    pub out_proj: Linear,
    /// Number of heads (divides `embed_dim`).
    pub num_heads: usize,
}

impl MultiheadAttention {
    /// `num_heads` heads over `embed_dim` features (`num_heads` must divide it), drawn from
    /// the default stream.
    pub fn new(embed_dim: usize, num_heads: usize, bias: bool) -> Result<MultiheadAttention> {
        MultiheadAttention::with_seed(embed_dim, num_heads, bias, rng::next_seed())
    }

    /// The same, drawn from its own generator seeded with `seed`.
    pub fn with_seed(embed_dim: usize, num_heads: usize, bias: bool, seed: u64) -> Result<MultiheadAttention> {
        if embed_dim == 0 || num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::argument(
                "MultiheadAttention",
                format!("embed_dim {embed_dim} must be positive and divisible by num_heads {num_heads}"),
            ));
        }
        let three = super::checked_size("MultiheadAttention", "3 × embed_dim", &[3, embed_dim])?;
        super::checked_size("MultiheadAttention", "4 × embed_dim", &[4, embed_dim])?;
        let mut rng = Rng::new(seed);
        let xavier = (6.0 / (embed_dim + three) as f32).sqrt();
        let in_proj_weight = uniform_param(&[three, embed_dim], xavier, &mut rng)?;
        let out_weight = uniform_param(&[embed_dim, embed_dim], 1.0 / (embed_dim as f32).sqrt(), &mut rng)?;
        let zeros = |n: usize| -> Result<Option<Tensor>> {
            if bias {
                Ok(Some(Tensor::zeros(&[n])?.requires_grad()?))
            } else {
                Ok(None)
            }
        };
        Ok(MultiheadAttention {
            in_proj_weight,
            in_proj_bias: zeros(three)?,
            out_proj: Linear { weight: out_weight, bias: zeros(embed_dim)? },
            num_heads,
        })
    }

    /// The embedding size `E`.
    pub fn embed_dim(&self) -> usize {
        self.in_proj_weight.shape()[1]
    }

    /// Attends from `query` `[B, Tq, E]` to `key` and `value` `[B, Tk, E]` → `[B, Tq, E]`:
    /// the three input projections, the heads split to `[B, H, T, E/H]`, scaled dot-product
    /// attention (scale `1/√(E/H)`) with the additive float `mask` (anything that broadcasts
    /// to `[B, H, Tq, Tk]`, e.g. PyTorch's 2-d `attn_mask` `[Tq, Tk]`; PyTorch's 3-d
    /// `[B·H, Tq, Tk]` reshaped to `[B, H, Tq, Tk]`), the heads joined and the output
    /// projection. PyTorch's output with `need_weights=False`; the mask gets no gradient.
    pub fn forward(&self, query: &Tensor, key: &Tensor, value: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let e = self.embed_dim();
        for (arg, t) in [("query", query), ("key", key), ("value", value)] {
            if t.rank() != 3 || t.shape()[2] != e {
                return Err(Error::shape(
                    "MultiheadAttention",
                    &[query.shape(), key.shape(), value.shape()],
                    format!("`{arg}` must be [B, T, {e}]"),
                ));
            }
        }
        if key.shape()[..2] != value.shape()[..2] || query.shape()[0] != key.shape()[0] {
            return Err(Error::shape(
                "MultiheadAttention",
                &[query.shape(), key.shape(), value.shape()],
                "query, key and value must share the batch size, key and value the length",
            ));
        }
        let (h, d) = (self.num_heads, e / self.num_heads);
        let project = |x: &Tensor, i: usize| -> Result<Tensor> {
            let (from, to) = ((i * e) as isize, ((i + 1) * e) as isize);
            let w = crate::slice(&self.in_proj_weight, 0, from, to, 1)?;
            let b = self.in_proj_bias.as_ref().map(|b| crate::slice(b, 0, from, to, 1)).transpose()?;
            let y = crate::linear(x, &w, b.as_ref())?;
            // [B, T, E] → [B, H, T, D]
            let (bs, t) = (x.shape()[0] as isize, x.shape()[1] as isize);
            crate::permute(&crate::reshape(&y, [bs, t, h as isize, d as isize])?, [0, 2, 1, 3])
        };
        let (q, k, v) = (project(query, 0)?, project(key, 1)?, project(value, 2)?);
        let y = crate::attention(&q, &k, &v, mask, 1.0 / (d as f32).sqrt())?;
        let (bs, tq) = (query.shape()[0] as isize, query.shape()[1] as isize);
        let y = crate::reshape(&crate::permute(&y, [0, 2, 1, 3])?, [bs, tq, e as isize])?;
        self.out_proj.forward(&y)
    }
}

/// The additive causal mask `[size, size]` of self-attention: 0 on and below the
/// diagonal, `−∞` above it, so position `i` attends to positions `0..=i` only
/// (`torch.nn.Transformer.generate_square_subsequent_mask(size)`). Pass it as the `mask`
/// of [`MultiheadAttention::forward`] or of `ops::attention`; it broadcasts to
/// `[B, H, T, T]` and needs no gradient.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{causal_mask, MultiheadAttention};
/// use om_ops::{Tensor, methods::*};
/// let mask = causal_mask(3)?;
/// let inf = f32::NEG_INFINITY;
/// assert_eq!(mask.to_vec(), [0.0, inf, inf, 0.0, 0.0, inf, 0.0, 0.0, 0.0]);
/// // With the mask, changing the last token leaves the earlier outputs unchanged.
/// let mha = MultiheadAttention::with_seed(8, 2, true, 1)?;
/// let x = Tensor::randn_with_seed(&[1, 3, 8], 2)?;
/// let y = mha.forward(&x, &x, &x, Some(&mask))?;
/// let x2 = x.mul(&Tensor::from_vec([vec![1.0; 16], vec![-3.0; 8]].concat(), &[1, 3, 8])?)?;
/// let y2 = mha.forward(&x2, &x2, &x2, Some(&mask))?;
/// assert_eq!(y.to_vec()[..16], y2.to_vec()[..16]);
/// assert_ne!(y.to_vec()[16..], y2.to_vec()[16..]);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn causal_mask(size: usize) -> Result<Tensor> {
    super::checked_size("causal_mask", "size × size", &[size, size])?;
    Tensor::build_f32(&[size, size], |m| {
        for (i, row) in m.chunks_exact_mut(size.max(1)).enumerate() {
            row.iter_mut().enumerate().for_each(|(j, v)| *v = if j > i { f32::NEG_INFINITY } else { 0.0 });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::MultiheadAttention;
    use crate::nn::{self, Module};
    use crate::oracle::{assert_close, both_modes, Oracle};
    use om_core::Tensor;

    /// A layer holding the oracle's parameters of case `prefix`, loaded through a weights
    /// file with PyTorch's state-dict names.
    fn layer(o: &Oracle, prefix: &str, bias: bool) -> MultiheadAttention {
        let m = MultiheadAttention::with_seed(8, 2, bias, 1).unwrap();
        let state: Vec<(String, Tensor)> = o
            .names()
            .filter_map(|n| {
                n.strip_prefix(&format!("{prefix}_"))
                    .filter(|n| !n.starts_with('g') && n.contains("proj"))
                    .map(|s| (s.to_string(), o.get(n)))
            })
            .collect();
        assert_eq!(state.len(), m.parameters().len(), "{prefix}: {state:?}");
        let path = std::env::temp_dir().join(format!("om_mha_{prefix}_{}.safetensors", std::process::id()));
        om_core::io::save(&path, state.iter().map(|(n, t)| (n.as_str(), t))).unwrap();
        nn::load(&m, &path).unwrap();
        std::fs::remove_file(&path).ok();
        m
    }

    #[test]
    fn cross_attention_with_mask_matches_pytorch() {
        let o = Oracle::load_file("mha", "tools/oracle_mha.py");
        both_modes(|| {
            let m = layer(&o, "cross", true);
            let (q, k, v) = (o.get("cross_q"), o.get("cross_k"), o.get("cross_v"));
            let mask = o.get("cross_mask").detach();
            let y = m.forward(&q, &k, &v, Some(&mask)).unwrap();
            assert_close("mha_cross_y", &y, &o.get("cross_y"));
            let params = m.parameters();
            let mut inputs: Vec<(&str, &Tensor)> = vec![("q", &q), ("k", &k), ("v", &v)];
            inputs.extend(params.iter().map(|(n, t)| (n.as_str(), t)));
            o.check_grads("cross", &y, &inputs);
        });
    }

    #[test]
    fn self_attention_without_bias_matches_pytorch() {
        let o = Oracle::load_file("mha", "tools/oracle_mha.py");
        both_modes(|| {
            let m = layer(&o, "self", false);
            let q = o.get("self_q");
            let y = m.forward(&q, &q, &q, None).unwrap();
            assert_close("mha_self_y", &y, &o.get("self_y"));
            let params = m.parameters();
            let mut inputs: Vec<(&str, &Tensor)> = vec![("q", &q)];
            inputs.extend(params.iter().map(|(n, t)| (n.as_str(), t)));
            o.check_grads("self", &y, &inputs);
        });
    }

    #[test]
    fn initialisation_follows_pytorch() {
        let m = MultiheadAttention::with_seed(16, 4, true, 3).unwrap();
        let names: Vec<String> = m.parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
        assert_eq!(m.in_proj_weight.shape(), &[48, 16]);
        let xavier = (6.0f32 / 64.0).sqrt();
        let w = m.in_proj_weight.to_vec();
        assert!(w.iter().all(|x| x.abs() <= xavier));
        assert!(w.iter().any(|x| x.abs() > 0.9 * xavier), "in_proj_weight should fill U(±{xavier})");
        assert!(m.out_proj.weight.to_vec().iter().all(|x| x.abs() <= 0.25));
        assert!(m.in_proj_bias.as_ref().unwrap().to_vec().iter().all(|&x| x == 0.0));
        assert!(m.out_proj.bias.as_ref().unwrap().to_vec().iter().all(|&x| x == 0.0));
        let plain = MultiheadAttention::with_seed(16, 4, false, 3).unwrap();
        assert_eq!(plain.parameters().len(), 2);
        assert!(MultiheadAttention::new(10, 4, true).is_err());
    }
}
