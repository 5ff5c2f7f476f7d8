//! Weights files: a module's parameters and buffers as safetensors.

use super::Module;
use om_core::{io, no_grad, Error, Result, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// Every named tensor a weights file holds: the parameters, then the buffers (PyTorch's
/// `state_dict()`, without batch norm's `num_batches_tracked`).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{self, BatchNorm2d};
/// let names: Vec<String> = nn::state(&BatchNorm2d::new(4)?).into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn state<M: Module + ?Sized>(module: &M) -> Vec<(String, Tensor)> {
    let mut s = module.parameters();
    s.extend(module.buffers());
    s
}

fn duplicate(list: &[(String, Tensor)]) -> Option<&str> {
    let mut seen = std::collections::BTreeSet::new();
    list.iter().map(|(n, _)| n.as_str()).find(|n| !seen.insert(*n))
}

/// Writes the module's parameters and buffers to a safetensors file (PyTorch's
/// `torch.save(model.state_dict(), path)`, in the safetensors format).
///
/// # Examples
///
/// ```
/// use om_ops::nn::{self, Forward, Linear};
/// use om_ops::Tensor;
/// let path = std::env::temp_dir().join(format!("om_nn_save_doc_{}.safetensors", std::process::id()));
/// let trained = Linear::new(4, 2)?;
/// nn::save(&trained, &path)?;
/// let fresh = Linear::new(4, 2)?; // other random weights
/// nn::load(&fresh, &path)?;
/// # std::fs::remove_file(&path).ok();
/// let x = Tensor::randn(&[3, 4])?;
/// assert_eq!(fresh.forward(&x)?.to_vec(), trained.forward(&x)?.to_vec());
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn save<M: Module + ?Sized>(module: &M, path: impl AsRef<Path>) -> Result<()> {
    let s = state(module);
    if let Some(n) = duplicate(&s) {
        return Err(Error::argument("nn::save", format!("the module names `{n}` twice")));
    }
    io::save(path, s.iter().map(|(n, t)| (n.as_str(), t)))
}

/// Reads a safetensors file into the module's parameters and buffers. The file must hold
/// exactly the module's names, each with the same shape and dtype; every tensor is
/// checked before anything is written, so on any mismatch the error names the file and
/// the tensor and the module is left unchanged. A non-contiguous (transposed, sliced)
/// module tensor is written through its view; an expanded one (elements sharing memory)
/// is refused before any write.
///
/// PyTorch state dicts load as they are: batch norm's `PREFIX.num_batches_tracked` (an
/// integer scalar, next to a `PREFIX.running_mean` of the module) is accepted and not
/// stored — it only matters to PyTorch's `momentum=None` (cumulative average), which
/// [`BatchNorm2d`](super::BatchNorm2d) does not have (its momentum is a number), so the
/// loaded model computes what PyTorch's does. PyTorch loads a file without the counter
/// (ours) with `strict=True` too, filling it in with 0.
///
/// # Examples
///
/// ```
/// use om_ops::nn::{self, Linear};
/// let path = std::env::temp_dir().join(format!("om_nn_load_doc_{}.safetensors", std::process::id()));
/// nn::save(&Linear::new(4, 2)?, &path)?;
/// // `strict=True`: a layer of another shape refuses the file and keeps its weights.
/// let other = Linear::new(4, 3)?;
/// let before = other.weight.to_vec();
/// let err = nn::load(&other, &path).unwrap_err().to_string();
/// # std::fs::remove_file(&path).ok();
/// assert!(err.contains("nn::load") && err.contains("`weight`"), "{err}");
/// assert_eq!(other.weight.to_vec(), before);
/// # Ok::<(), om_ops::Error>(())
/// ```
pub fn load<M: Module + ?Sized>(module: &M, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file = io::load(path).map_err(|e| e.with_op("nn::load"))?;
    load_state(module, file, &path.display().to_string())
}

fn load_state<M: Module + ?Sized>(module: &M, mut file: BTreeMap<String, Tensor>, from: &str) -> Result<()> {
    const OP: &str = "nn::load";
    let s = state(module);
    if let Some(n) = duplicate(&s) {
        return Err(Error::argument(OP, format!("the module names `{n}` twice")));
    }
    let mut pairs = Vec::with_capacity(s.len());
    for (name, t) in &s {
        let src = file.remove(name).ok_or_else(|| Error::argument(OP, format!("{from} has no tensor `{name}`")))?;
        if src.shape() != t.shape() {
            return Err(Error::shape(OP, &[t.shape(), src.shape()], format!("`{name}` in {from} has the wrong shape")));
        }
        if src.dtype() != t.dtype() {
            return Err(Error::argument(OP, format!("`{name}` in {from} is {}, the module's is {}", src.dtype(), t.dtype())));
        }
        if t.dtype() != om_core::DType::F32 {
            return Err(Error::argument(
                OP,
                format!("cannot load `{name}` from {from}: the module's tensor is {}, only f32 tensors load", t.dtype()),
            ));
        }
        if !t.is_non_overlapping() {
            return Err(Error::argument(
                OP,
                format!(
                    "cannot load `{name}` from {from}: the module's tensor is an expanded view (shape {:?}, strides {:?}) whose elements share memory; nothing was loaded",
                    t.shape(),
                    t.strides()
                ),
            ));
        }
        pairs.push((name, t, src));
    }
    drop_batch_counters(&s, &mut file, from)?;
    if let Some(extra) = file.keys().next() {
        return Err(Error::argument(OP, format!("{from} holds `{extra}`, which the module does not have")));
    }
    // Every tensor checked: the writes below cannot fail on the file's content.
    no_grad(|| {
        pairs
            .into_iter()
            .try_for_each(|(name, t, src)| t.copy_(&src).map_err(|e| Error::argument(OP, format!("`{name}` from {from}: {e}"))))
    })
}

/// Removes PyTorch's `PREFIX.num_batches_tracked` batch-norm counters from `file`: those
/// next to a `PREFIX.running_mean` of the module, each checked to be an integer scalar.
fn drop_batch_counters(state: &[(String, Tensor)], file: &mut BTreeMap<String, Tensor>, from: &str) -> Result<()> {
    for (name, _) in state {
        let Some(prefix) = name.strip_suffix("running_mean") else { continue };
        let key = format!("{prefix}num_batches_tracked");
        if let Some(t) = file.remove(&key) {
            if t.dtype() != om_core::DType::I32 || t.numel() != 1 {
                return Err(Error::argument("nn::load", format!("`{key}` in {from} must be an integer scalar (shape {:?})", t.shape())));
            }
        }
    }
    Ok(())
}
