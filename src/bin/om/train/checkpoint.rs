//! `om train --checkpoint DIR` / `--resume DIR`: everything a run needs to continue bit for
//! bit after an epoch, and the check that a checkpoint is whole and belongs to this run.
//!
//! A checkpoint after epoch `E` is three files in `DIR`: `model-E.safetensors` (`nn::save`:
//! parameters and batch-norm buffers), `optimizer-E.safetensors` (`optim::save`: Adam's or
//! AdamW's moments, step counts and rate) and [`STATE`], a text file naming the task and the
//! settings that shape the run (seed, batch, learning rate, shards), the epoch (the
//! learning-rate schedule is a function of it: per epoch, or per step for a task with its
//! own scheduler, rebuilt and stepped past the epochs' steps), the run's generator and the thread's default stream
//! ([`RngState`] bytes), the loader's state (epochs begun, shuffle generator, order), the
//! recorded curves, and each of the two tensor files' length and FNV-1a hash.
//!
//! Every file is written under a temporary name and renamed into place; [`STATE`] is
//! renamed last, so it is the commit point: until it is replaced the previous checkpoint
//! (whose files are removed only afterwards) stays whole. Reading checks everything — the
//! magic line and the `end` line (truncation), every field, the task and settings against
//! this run, the tensor files' lengths and hashes, the model's names and shapes — before
//! the run starts, and any failure is an error naming the file; nothing is written then.

use super::{History, Options};
use onemodel::core::io;
use onemodel::core::rng::{get_rng_state, Rng, RngState};
use onemodel::data::{DataLoader, Dataset, LoaderState};
use onemodel::ops::nn::{self, Module};
use onemodel::ops::optim::{self, Optimizer};
use onemodel::{Error, Result};
use std::collections::BTreeMap;

use std::path::{Path, PathBuf};

/// The checkpoint's text file (the commit point).
pub(crate) const STATE: &str = "checkpoint.txt";
const MAGIC: &str = "om train checkpoint v1";
const OP: &str = "om train --resume";

/// What the loop hands over after an epoch.
pub(crate) struct State<'a> {
    pub(crate) epoch: usize,
    pub(crate) rng: &'a Rng,
    pub(crate) loader: LoaderState,
    pub(crate) history: &'a History,
}

/// What a run continues from.
pub(crate) struct Resumed {
    pub(crate) epoch: usize,
    pub(crate) rng: Rng,
    pub(crate) default_rng: RngState,
    pub(crate) history: History,
}

/// FNV-1a (64 bits) of `bytes`: enough to catch a truncated or altered file.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the checkpoint after `state.epoch` to `dir` (see the module doc), then removes the
/// previous epoch's tensor files.
pub(crate) fn save(dir: &Path, task: &str, o: &Options, model: &dyn Module, opt: &dyn Optimizer, state: &State) -> Result<()> {
    let e = state.epoch;
    let files = [format!("model-{e}.safetensors"), format!("optimizer-{e}.safetensors")];
    // Both saves write whole files or none (`io::write_atomic`).
    nn::save(model, dir.join(&files[0]))?;
    optim::save(opt, dir.join(&files[1]))?;
    let mut text =
        format!("{MAGIC}\ntask {task}\nepoch {e}\nseed {}\nbatch {}\nlr {:08x}\nshards {}\n", o.seed, o.batch, o.lr.to_bits(), o.shards);
    for (key, file) in ["model", "optimizer"].iter().zip(&files) {
        let bytes = std::fs::read(dir.join(file))
            .map_err(|err| Error::argument("om train --checkpoint", format!("cannot read back {}: {err}", dir.join(file).display())))?;
        text += &format!("{key} {file} {} {:016x}\n", bytes.len(), fnv1a(&bytes));
    }
    text += &format!("rng {}\ndefault_rng {}\n", hex(&state.rng.state().to_bytes()), hex(&get_rng_state().to_bytes()));
    let l = &state.loader;
    let loader_rng = l.rng.map_or_else(|| "none".to_string(), |r| hex(&r.to_bytes()));
    let order: Vec<String> = l.order.iter().map(usize::to_string).collect();
    text += &format!("loader_epochs {}\nloader_rng {loader_rng}\nloader_order {}\n", l.epochs, order.join(" "));
    let h = state.history;
    let bits = |v: &mut dyn Iterator<Item = f64>| v.map(|x| format!("{:016x}", x.to_bits())).collect::<Vec<_>>().join(" ");
    text += &format!("last_loss {:08x}\n", h.last_loss.to_bits());
    text += &format!("epoch_losses {}\n", bits(&mut h.epoch_losses.iter().copied()));
    text += &format!("metrics {}\n", bits(&mut h.metrics.iter().copied()));
    text += &format!("batch_losses {}\n", bits(&mut h.batch_losses.iter().flat_map(|&(x, y)| [x, y])));
    text += "end\n";
    let state_file = dir.join(STATE);
    io::write_atomic(&state_file, text.as_bytes())
        .map_err(|err| Error::argument("om train --checkpoint", format!("cannot write {}: {err}", state_file.display())))?;
    // The new checkpoint is committed: the older epochs' files go.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = ["model-", "optimizer-"].iter().any(|p| name.starts_with(p)) && name.ends_with(".safetensors");
            if ours && !files.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(())
}

/// Reads the checkpoint in `dir` into `model`, `opt` and `loader` and returns the rest of
/// the run's state; an error naming the file when the checkpoint is incomplete, damaged, of
/// another task or of other settings than `o`.
pub(crate) fn load<D: Dataset>(
    dir: &Path,
    task: &str,
    o: &Options,
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    loader: &mut DataLoader<D>,
) -> Result<Resumed> {
    let path = dir.join(STATE);
    let shown = path.display().to_string();
    let bad = |why: String| Error::argument(OP, format!("{shown}: {why}"));
    let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Err(bad(format!("not an om train checkpoint (its first line is not `{MAGIC}`)")));
    }
    let mut fields = BTreeMap::new();
    let mut ended = false;
    for line in lines {
        if ended {
            return Err(bad("text after the `end` line".into()));
        }
        if line == "end" {
            ended = true;
            continue;
        }
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        if fields.insert(key, value).is_some() {
            return Err(bad(format!("`{key}` appears twice")));
        }
    }
    if !ended {
        return Err(bad("no `end` line: the file is truncated".into()));
    }
    let field = |k: &str| fields.get(k).copied().ok_or_else(|| bad(format!("no `{k}` line")));
    let number = |k: &str| field(k)?.parse::<u64>().map_err(|_| bad(format!("`{k}` is not a whole number")));
    let hex64 = |k: &str, v: &str| u64::from_str_radix(v, 16).map_err(|_| bad(format!("`{k}` holds `{v}`, not hexadecimal bits")));
    let rng_state = |k: &str, v: &str| {
        let bytes: Option<Vec<u8>> = v
            .len()
            .is_multiple_of(2)
            .then(|| (0..v.len()).step_by(2).map(|i| u8::from_str_radix(v.get(i..i + 2)?, 16).ok()).collect())
            .flatten();
        let bytes = bytes.ok_or_else(|| bad(format!("`{k}` is not hexadecimal bytes")))?;
        RngState::from_bytes(&bytes).map_err(|e| bad(format!("`{k}`: {e}")))
    };
    let floats = |k: &str| -> Result<Vec<f64>> { field(k)?.split_whitespace().map(|v| hex64(k, v).map(f64::from_bits)).collect() };

    let saved_task = field("task")?;
    if saved_task != task {
        return Err(bad(format!("it is a checkpoint of --task {saved_task}, this run is --task {task}")));
    }
    let lr = u32::try_from(hex64("lr", field("lr")?)?).map(f32::from_bits).map_err(|_| bad("`lr` is not f32 bits".into()))?;
    let settings = [
        ("--seed", number("seed")?.to_string(), o.seed.to_string()),
        ("--batch", number("batch")?.to_string(), o.batch.to_string()),
        ("--lr", lr.to_string(), o.lr.to_string()),
        ("--shards", number("shards")?.to_string(), o.shards.to_string()),
    ];
    for (option, saved, now) in &settings {
        if saved != now {
            return Err(bad(format!("it was written with {option} {saved}, this run has {option} {now}")));
        }
    }
    let epoch = usize::try_from(number("epoch")?).map_err(|_| bad("`epoch` is too large".into()))?;

    // The tensor files: whole and unaltered, then loaded (each checked before any write).
    let mut tensor_files: Vec<PathBuf> = Vec::new();
    for key in ["model", "optimizer"] {
        let parts: Vec<&str> = field(key)?.split(' ').collect();
        let [file, len, hash] = parts[..] else { return Err(bad(format!("`{key}` needs a file name, a length and a hash"))) };
        if file.contains(['/', '\\']) || file.starts_with('.') {
            return Err(bad(format!("`{key}` names `{file}`, not a file of the checkpoint's directory")));
        }
        let p = dir.join(file);
        let bytes = std::fs::read(&p).map_err(|e| Error::argument(OP, format!("{}: cannot read it: {e}", p.display())))?;
        let (len, hash) = (len.parse::<usize>().map_err(|_| bad(format!("`{key}` length `{len}`")))?, hex64(key, hash)?);
        if bytes.len() != len || fnv1a(&bytes) != hash {
            return Err(Error::argument(
                OP,
                format!("{}: damaged or replaced ({} bytes, {shown} expects {len} bytes with hash {hash:016x})", p.display(), bytes.len()),
            ));
        }
        tensor_files.push(p);
    }
    let rng = Rng::from_state(rng_state("rng", field("rng")?)?);
    let default_rng = rng_state("default_rng", field("default_rng")?)?;
    let loader_rng = match field("loader_rng")? {
        "none" => None,
        v => Some(rng_state("loader_rng", v)?),
    };
    let order = field("loader_order")?
        .split_whitespace()
        .map(|v| v.parse::<usize>().map_err(|_| bad(format!("`loader_order` holds `{v}`"))))
        .collect::<Result<Vec<_>>>()?;
    let loader_state = LoaderState { epochs: number("loader_epochs")?, rng: loader_rng, order };
    let last_loss = u32::try_from(hex64("last_loss", field("last_loss")?)?)
        .map(f32::from_bits)
        .map_err(|_| bad("`last_loss` is not f32 bits".into()))?;
    let (epoch_losses, metrics, flat) = (floats("epoch_losses")?, floats("metrics")?, floats("batch_losses")?);
    if epoch_losses.len() != epoch || metrics.len() != epoch || !flat.len().is_multiple_of(2) {
        return Err(bad(format!("the recorded curves do not cover {epoch} epoch(s)")));
    }
    let batch_losses = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();

    nn::load(model, &tensor_files[0]).map_err(|e| e.with_op(OP))?;
    optim::load(opt, &tensor_files[1]).map_err(|e| e.with_op(OP))?;
    loader.set_state(loader_state).map_err(|e| bad(e.to_string()))?;
    Ok(Resumed { epoch, rng, default_rng, history: History { batch_losses, epoch_losses, metrics, last_loss } })
}
