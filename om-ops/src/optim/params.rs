//! What every optimizer shares: its named parameters ([`Params`]), their per-parameter
//! state ([`ParamState`]: step counts and `f32` buffers), and the checks that make a step
//! all-or-nothing (every gradient checked, every buffer allocated, before anything is
//! written).

use om_core::compute::Compute;
use om_core::kernels::elementwise::PAR_CHUNK;
use om_core::kernels::parallel::{for_each_tile, TileMut, Tiled};
use om_core::pool::max_buffer_bytes;
use om_core::{no_grad, DType, Error, Result, Tensor};

/// The parameters an optimizer updates, each with a name (the key of its state in a state
/// file). From a `Vec<Tensor>` the names are the indices (`0`, `1`, ...); from a module's
/// [`parameters`](crate::nn::Module::parameters) they are its dotted names
/// (`conv1.weight`, ...).
///
/// # Examples
///
/// ```
/// use om_ops::optim::Params;
/// use om_ops::methods::*;
/// use om_ops::Tensor;
/// let p = Params::from(vec![Tensor::zeros(&[2])?.requires_grad()?]);
/// assert_eq!(p.names(), ["0"]);
/// # Ok::<(), om_ops::Error>(())
/// ```
#[derive(Clone)]
pub struct Params {
    tensors: Vec<Tensor>,
    names: Vec<String>,
}

impl Params {
    /// The parameter tensors.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Their names, in the same order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Checks that every parameter is a contiguous `f32` leaf and that no name repeats.
    pub(crate) fn checked(self, op: &'static str) -> Result<Params> {
        for (i, p) in self.tensors.iter().enumerate() {
            if p.dtype() != DType::F32 || !p.is_contiguous() || !p.is_leaf() {
                return Err(Error::argument(op, format!("parameter {i} ({}) must be a contiguous f32 leaf", self.names[i])));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(n) = self.names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(Error::argument(op, format!("two parameters are named `{n}`")));
        }
        Ok(self)
    }
}

impl From<Vec<Tensor>> for Params {
    fn from(tensors: Vec<Tensor>) -> Params {
        let names = (0..tensors.len()).map(|i| i.to_string()).collect();
        Params { tensors, names }
    }
}

impl From<Vec<(String, Tensor)>> for Params {
    fn from(named: Vec<(String, Tensor)>) -> Params {
        let (names, tensors) = named.into_iter().unzip();
        Params { tensors, names }
    }
}

/// Per-parameter state: a step count (PyTorch's `state["step"]`) and `slots.len()` `f32`
/// buffers of the parameter's size (`bufs[slot][param]`, e.g. Adam's `exp_avg` and
/// `exp_avg_sq`). A parameter with step 0 has no state yet (its buffers hold their initial
/// values); buffers may be left unallocated (`bufs[slot]` empty) until a setting needs them.
pub(crate) struct ParamState {
    /// The buffers' names in state files (PyTorch's state keys).
    pub(crate) slots: &'static [&'static str],
    pub(crate) bufs: Vec<Vec<Vec<f32>>>,
    pub(crate) steps: Vec<u64>,
}

impl ParamState {
    /// Step counts of 0 and no buffers allocated yet.
    pub(crate) fn unallocated(slots: &'static [&'static str], params: &Params) -> ParamState {
        ParamState { slots, bufs: vec![Vec::new(); slots.len()], steps: vec![0; params.tensors.len()] }
    }

    /// Step counts of 0 and every buffer filled with `init`.
    pub(crate) fn filled(op: &'static str, slots: &'static [&'static str], params: &Params, init: f32) -> Result<ParamState> {
        let mut s = ParamState::unallocated(slots, params);
        for slot in 0..slots.len() {
            s.allocate(op, slot, params, init)?;
        }
        Ok(s)
    }

    /// Allocates the buffers of `slot` filled with `init`, unless they are already there.
    pub(crate) fn allocate(&mut self, op: &'static str, slot: usize, params: &Params, init: f32) -> Result<()> {
        if self.bufs[slot].len() != params.tensors.len() {
            self.bufs[slot] = params.tensors.iter().map(|p| filled_state(op, p.numel(), init)).collect::<Result<_>>()?;
        }
        Ok(())
    }
}

/// `len` copies of `init`, or `Error::OutOfMemory` naming `op` when the request is over the
/// pool's limit ([`max_buffer_bytes`]) or the allocator refuses it.
pub(crate) fn filled_state(op: &'static str, len: usize, init: f32) -> Result<Vec<f32>> {
    let bytes = len.saturating_mul(4);
    let limit = max_buffer_bytes();
    let refused = || Error::OutOfMemory { op, bytes: bytes as u64, limit: limit as u64 };
    if bytes > limit {
        return Err(refused());
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| refused())?;
    v.resize(len, init);
    Ok(v)
}

/// The gradients an update reads, once every one is checked: read in place (every gradient
/// is contiguous, the usual case, since the engine makes them so: nothing is allocated), or
/// contiguous copies made before any parameter is written.
pub(crate) enum CheckedGrads {
    InPlace,
    Copies(Vec<(usize, Tensor)>),
}

/// Checks the gradient of every parameter that has one against its parameter (same shape,
/// the parameter a contiguous `f32` tensor), so that the updates made from them cannot fail.
pub(crate) fn checked_grads(op: &'static str, params: &[Tensor]) -> Result<CheckedGrads> {
    let mut contiguous = true;
    for (i, p) in params.iter().enumerate() {
        let Some(g) = p.grad() else { continue };
        if p.dtype() != DType::F32 || !p.is_contiguous() {
            return Err(Error::argument(op, format!("parameter {i} must be a contiguous f32 tensor")));
        }
        if g.shape() != p.shape() || g.dtype() != DType::F32 {
            return Err(Error::shape(op, &[p.shape(), g.shape()], format!("the gradient of parameter {i} must be f32 of its shape")));
        }
        contiguous &= g.is_contiguous();
    }
    if contiguous {
        return Ok(CheckedGrads::InPlace);
    }
    let mut copies = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let Some(g) = p.grad() else { continue };
        let g = if g.is_contiguous() { g } else { g.try_to_contiguous().map_err(|e| e.with_op(op))? };
        copies.push((i, g));
    }
    Ok(CheckedGrads::Copies(copies))
}

/// Runs `f(index, param, grad)` for every parameter that has a gradient, under no-grad,
/// once every gradient has been checked (see [`checked_grads`]).
pub(crate) fn for_each_grad(
    params: &[Tensor],
    grads: &CheckedGrads,
    mut f: impl FnMut(usize, &Tensor, &[f32]) -> Result<()>,
) -> Result<()> {
    no_grad(|| {
        match grads {
            CheckedGrads::InPlace => {
                for (i, p) in params.iter().enumerate() {
                    if let Some(g) = p.grad() {
                        g.try_with_f32(|gv| f(i, p, gv))??;
                    }
                }
            }
            CheckedGrads::Copies(copies) => {
                for (i, g) in copies {
                    g.try_with_f32(|gv| f(*i, &params[*i], gv))??;
                }
            }
        }
        Ok(())
    })
}

/// Runs `f(p, g, bufs)` over matching chunks of a parameter's values `p`, its gradient `g`
/// and its state buffers `bufs` (`None`: a buffer the config does not use), all of one
/// length, in chunks of [`PAR_CHUNK`] elements (those of the flat element-wise maps) on the
/// thread team. Every update rule reads and writes element `k` of each array at position
/// `k` only, so how the arrays are cut cannot change a bit (`tests/optim_chunks.rs`).
pub(crate) fn update_chunks<const N: usize>(
    p: &mut [f32],
    g: &[f32],
    bufs: [Option<&mut [f32]>; N],
    f: impl Fn(&mut [f32], &[f32], [Option<&mut [f32]>; N]) + Sync + Send,
) {
    assert!(g.len() == p.len() && bufs.iter().flatten().all(|b| b.len() == p.len()), "optimizer: state of another length");
    let outs = (Tiled::contiguous(p, PAR_CHUNK), bufs.map(|b| b.map(|b| Tiled::contiguous(b, PAR_CHUNK))));
    for_each_tile(Compute::settings().threads, outs, |i, (p, bufs)| {
        let p = p.into_slice();
        f(p, &g[i * PAR_CHUNK..][..p.len()], bufs.map(|b| b.map(TileMut::into_slice)))
    });
}

/// The parts of an optimizer that are the same for all: for a struct `$name` with fields
/// `params: Params`, `config: $config` and `state: ParamState`, and an inherent
/// `fn update(&mut self) -> Result<()>` (its step), generates `config` and `set_config`
/// and the whole [`Optimizer`](super::Optimizer) impl.
macro_rules! optimizer_impl {
    ($name:ident, $config:ident) => {
        impl $name {
            /// The hyper-parameters.
            pub fn config(&self) -> &$config {
                &self.config
            }

            /// Replaces the hyper-parameters, checked first (on an error nothing changes).
            /// The state is kept; a buffer the new config needs and the old one did not is
            /// allocated by the next step.
            pub fn set_config(&mut self, config: $config) -> om_core::Result<()> {
                config.validate()?;
                self.config = config;
                Ok(())
            }
        }

        impl $crate::optim::Optimizer for $name {
            fn step(&mut self) -> om_core::Result<()> {
                self.update()
            }

            fn params(&self) -> &[om_core::Tensor] {
                self.params.tensors()
            }

            fn lr(&self) -> f32 {
                self.config.lr
            }

            fn set_lr(&mut self, lr: f32) {
                self.config.lr = lr;
            }

            fn state_dict(&self) -> om_core::Result<Vec<(String, om_core::Tensor)>> {
                $crate::optim::state::state_dict(stringify!($name), &self.config, &self.params, &self.state)
            }

            fn load_state_dict(&mut self, file: std::collections::BTreeMap<String, om_core::Tensor>, from: &str) -> om_core::Result<()> {
                $crate::optim::state::load_state_dict(
                    &mut self.config,
                    &self.params,
                    &mut self.state,
                    file,
                    from,
                    $config::validate,
                    $config::buffers,
                )
            }
        }
    };
}

pub(crate) use optimizer_impl;
