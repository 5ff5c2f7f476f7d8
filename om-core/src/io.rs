//! Reading and writing named tensors as safetensors files (the format PyTorch's
//! `safetensors` package writes): weights files, and the oracle data in `testdata/`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

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
    // Duplicate names first: the JSON parser would keep the last one silently.
    let header_len = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    if let Some(header) = header_len.and_then(|n| bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)) {
        if let Some(name) = duplicate_key(header) {
            return Err(Error::argument(OP, format!("{origin} is not valid safetensors: the header names the tensor \"{name}\" twice")));
        }
    }
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| Error::argument(OP, format!("{origin} is not valid safetensors: {} ({e})", explain(&e, bytes.len()))))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let t =
            tensor(&name, &view).map_err(|e| Error::argument(OP, format!("{origin}: tensor `{name}` (shape {:?}): {e}", view.shape())))?;
        out.insert(name, t);
    }
    Ok(out)
}

/// What a safetensors parse error means, for a file of `len` bytes.
fn explain(e: &safetensors::SafeTensorError, len: usize) -> String {
    use safetensors::SafeTensorError as E;
    match e {
        E::HeaderTooSmall => format!("the file is {len} bytes, too short for the 8-byte header length"),
        E::HeaderTooLarge => "the header length is above the 100 MB limit".into(),
        E::InvalidHeaderLength => format!("the header length runs past the end of the file ({len} bytes)"),
        E::InvalidHeader => "the header is not UTF-8".into(),
        E::InvalidHeaderStart => "the header does not start with `{`".into(),
        E::InvalidHeaderDeserialization | E::JsonError(_) => "the header is not valid safetensors JSON".into(),
        E::MetadataIncompleteBuffer => "the tensors' byte ranges do not cover the data exactly (truncated or padded file)".into(),
        E::InvalidOffset(name) => format!("the byte range of `{name}` does not follow the previous tensor's"),
        E::TensorInvalidInfo => "a tensor's byte range does not match its shape and dtype".into(),
        E::ValidationOverflow => "a tensor's shape or byte size overflows".into(),
        _ => "malformed data".into(),
    }
}

/// One tensor of a parsed file.
fn tensor(name: &str, view: &safetensors::tensor::TensorView<'_>) -> Result<Tensor> {
    let shape = view.shape().to_vec();
    let data = view.data();
    match view.dtype() {
        safetensors::Dtype::F32 => {
            let v: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            Tensor::from_vec(v, &shape)
        }
        safetensors::Dtype::F64 => {
            let v: Vec<f32> = data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect();
            Tensor::from_vec(v, &shape)
        }
        safetensors::Dtype::I32 => {
            let v: Vec<i32> = data.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            Tensor::from_vec_i32(v, &shape)
        }
        safetensors::Dtype::U8 => Tensor::from_vec_i32(data.iter().map(|&b| b as i32).collect(), &shape),
        safetensors::Dtype::I64 => {
            let v: Vec<i32> = data
                .chunks_exact(8)
                .map(|c| {
                    let x = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                    i32::try_from(x).map_err(|_| Error::argument(OP, format!("`{name}`: value {x} does not fit i32")))
                })
                .collect::<Result<_>>()?;
            Tensor::from_vec_i32(v, &shape)
        }
        other => Err(Error::argument(OP, format!("unsupported dtype {other:?}"))),
    }
}

/// The first top-level key that appears twice in the JSON header at the start of `rest`
/// (the parser keeps the last of duplicate keys silently), compared in their raw form.
fn duplicate_key(rest: &[u8]) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < rest.len() {
        match rest[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return None;
                }
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < rest.len() && rest[i] != b'"' {
                    i += if rest[i] == b'\\' { 2 } else { 1 };
                }
                let key = rest.get(start..i.min(rest.len()))?;
                let colon = rest[i.min(rest.len())..].iter().skip(1).find(|b| !b.is_ascii_whitespace()) == Some(&b':');
                if depth == 1 && colon && !seen.insert(key) {
                    return Some(String::from_utf8_lossy(key).into_owned());
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Reads a safetensors file; every error names the file.
pub fn load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::argument(OP, format!("cannot read {}: {e}", path.display())))?;
    parse(&bytes, &path.display().to_string())
}

/// Serialises named tensors (in name order) to safetensors bytes.
pub fn to_bytes<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let mut owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in tensors {
        // A view too large to materialise (an expansion) is an out-of-memory error naming
        // the tensor, checked before anything is gathered.
        let bytes = t.numel().checked_mul(4);
        let limit = crate::pool::max_buffer_bytes() as u64;
        if bytes.is_none_or(|b| b as u64 > limit) {
            return Err(Error::OutOfMemory { op: OP, bytes: bytes.map_or(u64::MAX, |b| b as u64), limit });
        }
        let (dtype, data) = match t.dtype() {
            DType::F32 => (safetensors::Dtype::F32, t.try_with_f32(|v| v.iter().flat_map(|v| v.to_le_bytes()).collect())),
            DType::I32 => (safetensors::Dtype::I32, t.try_with_i32(|v| v.iter().flat_map(|v| v.to_le_bytes()).collect())),
        };
        let data = data.map_err(|e| match e {
            Error::OutOfMemory { .. } => e.with_op(OP),
            other => Error::argument(OP, format!("tensor `{name}`: {other}")),
        })?;
        owned.push((name.to_string(), dtype, t.shape().to_vec(), data));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, data)| {
            safetensors::tensor::TensorView::new(*d, s.clone(), data)
                .map(|v| (n.clone(), v))
                .map_err(|e| Error::argument(OP, format!("`{n}`: {e}")))
        })
        .collect::<Result<_>>()?;
    safetensors::serialize(views, &None).map_err(|e| Error::argument(OP, format!("cannot serialise: {e}")))
}

/// Writes named tensors to a safetensors file.
pub fn save<'a>(path: impl AsRef<Path>, tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes(tensors)?;
    std::fs::write(path, bytes).map_err(|e| Error::argument(OP, format!("cannot write {}: {e}", path.display())))
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
