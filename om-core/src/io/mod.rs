//! Reading and writing named tensors as safetensors files (the format PyTorch's
//! `safetensors` package writes): weights files, and the oracle data in `testdata/`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

mod header;

const OP: &str = "safetensors";

/// Parses safetensors bytes into named tensors (`F32` and `I32`; `I64` ids are narrowed to
/// `i32` with a range check, `F64` values rounded to `f32`, `U8` values widened to `i32`).
/// Malformed data (a truncated or oversized header, offsets that do not tile the data,
/// shapes that disagree with their bytes, duplicate names, unsupported dtypes) is an
/// [`Error::Argument`] saying what is wrong.
pub fn from_bytes(bytes: &[u8]) -> Result<BTreeMap<String, Tensor>> {
    parse(bytes, "the safetensors data")
}

/// [`from_bytes`] with every error naming `origin` (a file path, or a description).
fn parse(bytes: &[u8], origin: &str) -> Result<BTreeMap<String, Tensor>> {
    let (entries, data) = header::parse(bytes).map_err(|why| Error::argument(OP, format!("{origin} is not valid safetensors: {why}")))?;
    let mut out = BTreeMap::new();
    for (name, entry) in entries {
        let t = tensor(&name, &entry.dtype, &entry.shape, &data[entry.begin..entry.end])
            .map_err(|e| Error::argument(OP, format!("{origin}: tensor `{name}` (shape {:?}): {e}", entry.shape)))?;
        out.insert(name, t);
    }
    Ok(out)
}

/// One tensor of a parsed file, from its checked entry and bytes.
fn tensor(name: &str, dtype: &str, shape: &[usize], data: &[u8]) -> Result<Tensor> {
    match dtype {
        "F32" => {
            let v: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            Tensor::from_vec(v, shape)
        }
        "F64" => {
            let v: Vec<f32> = data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect();
            Tensor::from_vec(v, shape)
        }
        "I32" => {
            let v: Vec<i32> = data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            Tensor::from_vec_i32(v, shape)
        }
        "U8" => Tensor::from_vec_i32(data.iter().map(|&b| b as i32).collect(), shape),
        "I64" => {
            let v: Vec<i32> = data
                .chunks_exact(8)
                .map(|c| {
                    let x = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                    i32::try_from(x).map_err(|_| Error::argument(OP, format!("`{name}`: value {x} does not fit i32")))
                })
                .collect::<Result<_>>()?;
            Tensor::from_vec_i32(v, shape)
        }
        other => Err(Error::argument(OP, format!("unsupported dtype {other}"))),
    }
}

/// Reads a safetensors file; every error names the file.
pub fn load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::argument(OP, format!("cannot read {}: {e}", path.display())))?;
    parse(&bytes, &path.display().to_string())
}

/// Serialises named tensors to safetensors bytes, in name order: byte for byte what the
/// reference `safetensors` crate writes for them. A name given twice is an error.
pub fn to_bytes<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let mut owned: Vec<(&str, &str, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in tensors {
        // A view too large to materialise (an expansion) is an out-of-memory error naming
        // the tensor, checked before anything is gathered.
        let bytes = t.numel().checked_mul(4);
        let limit = crate::pool::max_buffer_bytes() as u64;
        if bytes.is_none_or(|b| b as u64 > limit) {
            return Err(Error::OutOfMemory { op: OP, bytes: bytes.map_or(u64::MAX, |b| b as u64), limit });
        }
        let (dtype, data) = match t.dtype() {
            DType::F32 => ("F32", t.try_with_f32(|v| v.iter().flat_map(|v| v.to_le_bytes()).collect())),
            DType::I32 => ("I32", t.try_with_i32(|v| v.iter().flat_map(|v| v.to_le_bytes()).collect())),
        };
        let data = data.map_err(|e| match e {
            Error::OutOfMemory { .. } => e.with_op(OP),
            other => Error::argument(OP, format!("tensor `{name}`: {other}")),
        })?;
        owned.push((name, dtype, t.shape().to_vec(), data));
    }
    // The reference order: tensors of the larger dtype first (its `Dtype` order, in which
    // `F32` comes after `I32`, sorted descending), then by name. For the two dtypes written
    // here that is the dtype names' alphabetical order.
    owned.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    let mut names = std::collections::BTreeSet::new();
    if let Some(name) = owned.iter().map(|o| o.0).find(|n| !names.insert(*n)) {
        return Err(Error::argument(OP, format!("cannot serialise: the tensor name `{name}` is given twice")));
    }
    let layout: Vec<(&str, &str, &[usize], usize)> = owned.iter().map(|(n, d, s, data)| (*n, *d, &s[..], data.len())).collect();
    let header = header::write(&layout);
    let total = owned.iter().map(|o| o.3.len()).sum::<usize>() + 8 + header.len();
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| Error::OutOfMemory { op: OP, bytes: total as u64, limit: u64::MAX })?;
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for (_, _, _, data) in &owned {
        out.extend_from_slice(data);
    }
    Ok(out)
}

/// Writes named tensors to a safetensors file, atomically: the bytes go to a temporary
/// file beside `path`, which is synced and then renamed over `path`. A failure (a name
/// given twice, a full disk, a missing directory) is an error that leaves any existing
/// file at `path` as it was and no temporary file behind.
///
/// # Examples
///
/// ```
/// use om_core::{io, Tensor};
/// let path = std::env::temp_dir().join(format!("om-io-save-{}.safetensors", std::process::id()));
/// let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// io::save(&path, [("w", &w)])?;
/// assert!(io::save(&path, [("w", &w), ("w", &w)]).is_err()); // refused...
/// assert_eq!(io::load(&path)?["w"].to_vec(), vec![1.0, 2.0]); // ...and the file is intact
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), om_core::Error>(())
/// ```
pub fn save<'a>(path: impl AsRef<Path>, tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes(tensors)?;
    write_atomic(path, &bytes).map_err(|e| Error::argument(OP, format!("cannot write {}: {e}", path.display())))
}

/// Writes `bytes` to `path` whole or not at all: to a temporary file in `path`'s directory
/// (named after `path`, the process and a counter, so concurrent writes never share one),
/// synced, then renamed over `path`; on failure the temporary file is removed and any
/// file at `path` is left as it was. [`save`] writes through it.
///
/// # Examples
///
/// ```
/// let path = std::env::temp_dir().join(format!("om-io-write-atomic-{}.txt", std::process::id()));
/// om_core::io::write_atomic(&path, b"epoch 3\n")?;
/// assert_eq!(std::fs::read(&path)?, b"epoch 3\n");
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file"))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{}.{}.{n}.tmp", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_names_shapes_dtypes_and_bits() {
        let a = Tensor::from_vec(vec![1.5, -0.0, f32::INFINITY, 3.25e-39], &[2, 2]).unwrap();
        let b = Tensor::from_vec_i32(vec![7, -8, 9], &[3]).unwrap();
        let bytes = to_bytes([("a", &a), ("b", &b)]).unwrap();
        let back = from_bytes(&bytes).unwrap();
        assert_eq!(back["a"].shape(), &[2, 2]);
        let bits = |t: &Tensor| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back["a"]), bits(&a));
        assert_eq!(back["b"].dtype(), DType::I32);
        assert_eq!(back["b"].to_vec_i32(), vec![7, -8, 9]);
    }

    #[test]
    fn a_failed_save_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("om-io-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.safetensors");
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
        save(&path, [("a", &a)]).unwrap();
        let before = std::fs::read(&path).unwrap();
        // A directory where the file should go: the rename fails after the bytes are written.
        let blocked = dir.join("blocked.safetensors");
        std::fs::create_dir_all(blocked.join("inside")).unwrap();
        assert!(save(&blocked, [("a", &a)]).is_err());
        assert!(save(dir.join("missing").join("w.safetensors"), [("a", &a)]).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "only the file and the blocking directory remain: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reader_never_sees_a_half_written_file() {
        let path = std::env::temp_dir().join(format!("om-io-reader-{}.safetensors", std::process::id()));
        let versions: Vec<Tensor> = (0..2).map(|v| Tensor::full([1 << 20], v as f32).unwrap()).collect();
        save(&path, [("w", &versions[0])]).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..16 {
                    save(&path, [("w", &versions[i % 2])]).unwrap();
                }
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let w = load(&path).expect("a reader saw a partial file");
                let v = w["w"].to_vec();
                assert!(v.iter().all(|&x| x == v[0]) && v.len() == 1 << 20);
                reads += 1;
            }
        });
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(from_bytes(b"not a safetensors file").is_err());
    }

    #[test]
    fn duplicate_names_are_an_error() {
        let a = Tensor::from_vec(vec![1.0], &[1]).unwrap();
        let bytes = to_bytes([("ab", &a), ("ac", &a)]).unwrap();
        assert!(from_bytes(&bytes).is_ok());
        let text = String::from_utf8_lossy(&bytes).replace("\"ac\"", "\"ab\"");
        let e = from_bytes(text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("\"ab\" twice"), "{e}");
    }
}
