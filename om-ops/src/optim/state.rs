//! Optimizer state files: [`save`] writes an optimizer's hyper-parameters and
//! per-parameter state (step counts and buffers, keyed by parameter name) as safetensors;
//! [`load`] reads them back into an optimizer over the same parameters, so a run stopped
//! and resumed continues bit-identically (with [`nn::save`](crate::nn::save) /
//! [`nn::load`](crate::nn::load) for the weights).
//!
//! Keys: `hyper.NAME` for each hyper-parameter (`f32` scalars, `i32` 0/1 for flags,
//! `[2]` for Adam's betas), and for each parameter that has taken a step, `PARAM.step`
//! (`i32` scalar) and `PARAM.SLOT` (`f32`, the parameter's shape) for each of its buffers
//! (`exp_avg`, `exp_avg_sq`, `momentum_buffer`, `square_avg`, `grad_avg`, `sum` — PyTorch's
//! state keys). A parameter without a `.step` has no state yet.

use super::config::HyperParams;
use super::params::{filled_state, ParamState, Params};
use super::Optimizer;
use om_core::{io, DType, Error, Result, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes `opt`'s hyper-parameters and state to a safetensors file.
///
/// # Examples
///
/// ```
/// use om_ops::optim::{self, Adam, Optimizer};
/// use om_ops::methods::*;
/// use om_ops::Tensor;
/// let p = Tensor::ones(&[3])?.requires_grad()?;
/// let mut opt = Adam::new(vec![p.clone()], 0.1)?;
/// p.mul(&p)?.sum(None, false)?.backward()?;
/// opt.step()?;
/// let path = std::env::temp_dir().join("om_optim_state_doc.safetensors");
/// optim::save(&opt, &path)?;
/// let mut resumed = Adam::new(vec![p.clone()], 0.1)?;
/// optim::load(&mut resumed, &path)?;
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn save(opt: &dyn Optimizer, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let state = opt.state_dict().map_err(|e| e.with_op("optim::save"))?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some((n, _)) = state.iter().find(|(n, _)| !seen.insert(n.as_str())) {
        return Err(Error::argument("optim::save", format!("the state names `{n}` twice (a parameter named like a state key?)")));
    }
    io::save(path, state.iter().map(|(n, t)| (n.as_str(), t))).map_err(|e| e.with_op("optim::save"))
}

/// Reads a file written by [`save`] into `opt` (the same optimizer over parameters of the
/// same names and shapes): the file's hyper-parameters (the rate included) replace `opt`'s,
/// as PyTorch's `load_state_dict` does, and its per-parameter state replaces `opt`'s
/// (a parameter without state in the file starts afresh). On any error — unreadable file, a missing or extra key, a wrong
/// shape or dtype, a hyper-parameter out of range — the error names the file and `opt` is
/// left unchanged.
///
/// # Examples
///
/// ```
/// use om_ops::methods::*;
/// use om_ops::optim::{self, Optimizer, Sgd, SgdConfig};
/// use om_ops::Tensor;
/// let w = Tensor::from_vec(vec![1.0, -2.0], &[2])?.requires_grad()?;
/// let mut opt = SgdConfig::default().lr(0.1).momentum(0.9).build(vec![w.clone()])?;
/// w.mul(&w)?.sum(None, false)?.backward()?;
/// opt.step()?;
/// let path = std::env::temp_dir().join(format!("om_optim_load_doc_{}.safetensors", std::process::id()));
/// optim::save(&opt, &path)?;
/// // The file's hyper-parameters and momentum buffers replace the new optimizer's.
/// let mut resumed = Sgd::new(vec![w.clone()], 0.5)?;
/// optim::load(&mut resumed, &path)?;
/// assert_eq!((resumed.lr(), resumed.config().momentum), (0.1, 0.9));
/// // A state file of another optimizer is refused, the optimizer unchanged.
/// let mut adam = optim::Adam::new(vec![w.clone()], 0.5)?;
/// assert!(optim::load(&mut adam, &path).is_err());
/// assert_eq!(adam.lr(), 0.5);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn load(opt: &mut dyn Optimizer, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file = io::load(path).map_err(|e| e.with_op("optim::load"))?;
    opt.load_state_dict(file, &path.display().to_string())
}

/// The state-file tensors of `state` over `params` (see the module doc).
pub(crate) fn state_tensors(op: &'static str, params: &Params, state: &ParamState) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    for (i, (name, p)) in params.names().iter().zip(params.tensors()).enumerate() {
        let steps = state.steps[i];
        if steps == 0 {
            continue;
        }
        let step = i32::try_from(steps)
            .map_err(|_| Error::argument(op, format!("`{name}` has taken {steps} steps, more than a state file holds")))?;
        out.push((format!("{name}.step"), Tensor::from_vec_i32(vec![step], &[])?));
        for (slot, bufs) in state.slots.iter().zip(&state.bufs) {
            if let Some(b) = bufs.get(i) {
                out.push((format!("{name}.{slot}"), Tensor::from_slice(b, p.shape())?));
            }
        }
    }
    Ok(out)
}

/// The state read from a state file's remaining tensors (hyper-parameters already taken):
/// every buffer of `slots` that is `needed` (or already allocated in `current`) is
/// allocated, holding `inits[slot]` for parameters without state; each parameter with a
/// `.step` must have every needed buffer. Any key left over is an error.
pub(crate) fn read_state(
    op: &'static str,
    params: &Params,
    current: &ParamState,
    needed: &[bool],
    inits: &[f32],
    mut file: BTreeMap<String, Tensor>,
    from: &str,
) -> Result<ParamState> {
    let slots = current.slots;
    let mut state = ParamState::unallocated(slots, params);
    for s in 0..slots.len() {
        let in_file = params.names().iter().any(|n| file.contains_key(&format!("{n}.{}", slots[s])));
        if needed[s] || in_file || !current.bufs[s].is_empty() {
            state.allocate(op, s, params, inits[s])?;
        }
    }
    for (i, (name, p)) in params.names().iter().zip(params.tensors()).enumerate() {
        let Some(step) = file.remove(&format!("{name}.step")) else {
            if let Some(s) = slots.iter().find(|s| file.contains_key(&format!("{name}.{s}"))) {
                return Err(Error::argument(op, format!("{from} has `{name}.{s}` but no `{name}.step`")));
            }
            continue;
        };
        let steps = (step.dtype() == DType::I32 && step.shape().is_empty()).then(|| step.to_vec_i32()[0]).filter(|&s| s > 0);
        let steps = steps.ok_or_else(|| Error::argument(op, format!("`{name}.step` in {from} must be an i32 scalar above 0")))?;
        state.steps[i] = steps as u64;
        for (s, slot) in slots.iter().enumerate() {
            let key = format!("{name}.{slot}");
            let Some(t) = file.remove(&key) else {
                if needed[s] {
                    return Err(Error::argument(op, format!("{from} has no `{key}`")));
                }
                continue;
            };
            if t.shape() != p.shape() || t.dtype() != DType::F32 {
                return Err(Error::shape(op, &[p.shape(), t.shape()], format!("`{key}` in {from} must be f32 of its parameter's shape")));
            }
            let mut buf = filled_state(op, p.numel(), 0.0)?;
            t.with_f32(|v| buf.copy_from_slice(v));
            state.bufs[s][i] = buf;
        }
    }
    if let Some(extra) = file.keys().next() {
        return Err(Error::argument(op, format!("{from} holds `{extra}`, which is not a state of this optimizer's parameters")));
    }
    Ok(state)
}

/// An optimizer's state-file tensors: its config's hyper-parameters, then its state.
pub(crate) fn state_dict<C: HyperParams>(
    op: &'static str,
    config: &C,
    params: &Params,
    state: &ParamState,
) -> Result<Vec<(String, Tensor)>> {
    let mut out = config.to_tensors()?;
    out.extend(state_tensors(op, params, state)?);
    Ok(out)
}

/// The `hyper.NAME` keys of config `C`'s state files.
fn hyper_keys<C: HyperParams>() -> Vec<String> {
    C::default().to_tensors().map(|v| v.into_iter().map(|(k, _)| k).collect()).unwrap_or_default()
}

/// Fails unless the file's hyper-parameter keys are exactly `C`'s, naming the kind of
/// optimizer the file is from when its keys are another optimizer's.
fn check_kind<C: HyperParams>(file: &BTreeMap<String, Tensor>, from: &str) -> Result<()> {
    use super::{AdagradConfig, AdamConfig, RMSpropConfig, SgdConfig};
    let found: Vec<String> = file.keys().filter(|k| k.starts_with("hyper.")).cloned().collect();
    let mut want = hyper_keys::<C>();
    want.sort();
    if found == want {
        return Ok(());
    }
    let kinds = [
        (SgdConfig::KIND, hyper_keys::<SgdConfig>()),
        (AdamConfig::KIND, hyper_keys::<AdamConfig>()),
        (AdagradConfig::KIND, hyper_keys::<AdagradConfig>()),
        (RMSpropConfig::KIND, hyper_keys::<RMSpropConfig>()),
    ];
    let kind = kinds.into_iter().find(|(_, keys)| {
        let mut keys = keys.clone();
        keys.sort();
        keys == found
    });
    let what = match kind {
        Some((k, _)) => format!("a state file of {k}"),
        None if found.is_empty() => "not an optimizer state file (it has no `hyper.*` keys)".to_string(),
        None => format!("a state file of an unknown optimizer (hyper-parameters {})", found.join(", ")),
    };
    Err(Error::argument("optim::load", format!("{from} is {what}, not of {} (which needs {})", C::KIND, want.join(", "))))
}

/// Replaces an optimizer's config and state with a state file's (see [`read_state`]), both
/// or neither: `validate` checks the config read, `buffers` says which buffers it needs
/// and their initial values.
pub(crate) fn load_state_dict<C: HyperParams, const N: usize>(
    config: &mut C,
    params: &Params,
    state: &mut ParamState,
    mut file: BTreeMap<String, Tensor>,
    from: &str,
    validate: fn(&C) -> Result<()>,
    buffers: fn(&C) -> [(bool, f32); N],
) -> Result<()> {
    const OP: &str = "optim::load";
    check_kind::<C>(&file, from)?;
    let loaded = C::from_tensors(&mut file, from)?;
    validate(&loaded).map_err(|e| Error::argument(OP, format!("{from}: {e}")))?;
    let (needed, inits) = (buffers(&loaded).map(|b| b.0), buffers(&loaded).map(|b| b.1));
    let new_state = read_state(OP, params, state, &needed, &inits, file, from)?;
    (*config, *state) = (loaded, new_state);
    Ok(())
}
