//! Untrusted weights files: a valid file written by `nn::save`, mutated thousands of ways
//! (truncations, flipped bytes, header edits: lengths, dtypes, shapes whose product
//! overflows, lying offsets, duplicate names), must never panic on `nn::load`; every
//! failed load names the file and leaves the module exactly as it was. The same mutations
//! are read by the reference `safetensors` crate: our reader accepts exactly the files it
//! accepts (less the duplicate names it keeps silently) with the same tensors, and our writer
//! writes its bytes.

use om_core::Result;
use om_ops::nn::{self, BatchNorm2d, Embedding, Linear, Module};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Parameters of both dtypes' neighbours and a buffer: a linear layer, a batch norm and an
/// embedding table.
#[derive(Module)]
struct Small {
    fc: Linear,
    bn: BatchNorm2d,
    emb: Embedding,
}

fn small(seed: u64) -> Result<Small> {
    Ok(Small { fc: Linear::with_seed(3, 2, true, seed)?, bn: BatchNorm2d::new(2)?, emb: Embedding::with_seed(5, 2, None, seed + 1)? })
}

fn snapshot(m: &impl Module) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    nn::state(m).into_iter().map(|(n, t)| (n, t.shape().to_vec(), t.to_vec().iter().map(|v| v.to_bits()).collect())).collect()
}

/// SplitMix64: a small seeded generator, so every run mutates the same ways.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Splits a safetensors file into its header text and its data.
fn split(bytes: &[u8]) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (String::from_utf8(bytes[8..8 + n].to_vec()).unwrap(), bytes[8 + n..].to_vec())
}

/// A file from a header text and data; the length prefix is right unless `lie` is given.
fn join(header: &str, data: &[u8], lie: Option<u64>) -> Vec<u8> {
    let mut out = lie.unwrap_or(header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Replaces the `k`-th match (mod the count) of `pat` in `s` by `with`.
fn replace_nth(s: &str, pat: &str, with: &str, k: usize) -> String {
    let hits: Vec<usize> = s.match_indices(pat).map(|(i, _)| i).collect();
    if hits.is_empty() {
        return s.to_string();
    }
    let i = hits[k % hits.len()];
    format!("{}{}{}", &s[..i], with, &s[i + pat.len()..])
}

/// Replaces the `k`-th bracketed list after `key` by `with`.
fn replace_list(s: &str, key: &str, with: &str, k: usize) -> String {
    let hits: Vec<usize> = s.match_indices(key).map(|(i, _)| i).collect();
    if hits.is_empty() {
        return s.to_string();
    }
    let i = hits[k % hits.len()] + key.len();
    let Some(open) = s[i..].find('[').map(|o| i + o) else { return s.to_string() };
    let Some(close) = s[open..].find(']').map(|c| open + c) else { return s.to_string() };
    format!("{}{}{}", &s[..open], with, &s[close + 1..])
}

const NUMBERS: &[&str] =
    &["0", "1", "2", "7", "24", "4294967296", "9223372036854775807", "18446744073709551615", "18446744073709551616", "-1", "1e3", "3.5"];

/// One mutation of the valid file `good` (header text `header`, data `data`).
fn mutate(g: &mut Gen, good: &[u8], header: &str, data: &[u8]) -> Vec<u8> {
    match g.below(10) {
        0 => good[..g.below(good.len())].to_vec(),
        1 => {
            let mut b = good.to_vec();
            for _ in 0..1 + g.below(4) {
                let i = g.below(b.len());
                b[i] ^= 1 << g.below(8);
            }
            b
        }
        2 => {
            let mut b = good.to_vec();
            let i = 8 + g.below(header.len());
            b[i] = g.next() as u8;
            b
        }
        3 => {
            let n = header.len() as u64;
            let lie = match g.below(4) {
                0 => n.wrapping_add(1 + g.below(16) as u64),
                1 => n.wrapping_sub(1 + g.below(16) as u64),
                2 => 1 << (20 + g.below(44)),
                _ => g.next(),
            };
            join(header, data, Some(lie))
        }
        4 => {
            let dtype = g.pick(&["I32", "F64", "U8", "I64", "BF16", "F16", "BOOL", "F8_E4M3", "XX", ""]);
            join(&replace_nth(header, "F32", dtype, g.below(8)), data, None)
        }
        5 => {
            let dims: Vec<&str> = (0..g.below(4)).map(|_| g.pick(NUMBERS)).collect();
            join(&replace_list(header, "\"shape\"", &format!("[{}]", dims.join(",")), g.below(8)), data, None)
        }
        6 => {
            let (a, b) = (g.pick(NUMBERS), g.pick(NUMBERS));
            join(&replace_list(header, "\"data_offsets\"", &format!("[{a},{b}]"), g.below(8)), data, None)
        }
        7 => {
            // Duplicate (or new) names.
            let names = ["\"fc.weight\"", "\"fc.bias\"", "\"bn.weight\"", "\"bn.running_mean\"", "\"emb.weight\""];
            let (from, to) = (g.pick(&names), g.pick(&names));
            join(&replace_nth(header, from, to, 0), data, None)
        }
        8 => {
            let mut b = good.to_vec();
            let extra = 1 + g.below(64);
            b.extend((0..extra).map(|_| g.next() as u8));
            b
        }
        _ => {
            // Digit edits anywhere in the header (shapes, offsets), lengths kept honest.
            let digits: Vec<usize> = header.char_indices().filter(|(_, c)| c.is_ascii_digit()).map(|(i, _)| i).collect();
            let i = digits[g.below(digits.len())];
            let with = g.pick(NUMBERS);
            join(&format!("{}{}{}", &header[..i], with, &header[i + 1..]), data, None)
        }
    }
}

#[test]
fn mutated_weights_files_never_panic_and_failed_loads_change_nothing() -> Result<()> {
    const CASES: usize = 4000;
    let dir = std::env::temp_dir().join(format!("om-weights-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good_path = dir.join("good.safetensors");
    let source = small(1)?;
    source.bn.running_var.fill_(2.5)?;
    nn::save(&source, &good_path)?;
    let good = std::fs::read(&good_path).unwrap();
    let (header, data) = split(&good);

    let m = small(2)?;
    let before = snapshot(&m);
    let (mut panics, mut errors, mut loaded) = (Vec::new(), 0usize, 0usize);
    let mut g = Gen(11);
    for case in 0..CASES {
        let bytes = mutate(&mut g, &good, &header, &data);
        // A fresh file each time: rewriting one file in place can wait on its writeback.
        let bad_path = dir.join(format!("mutated-{case}.safetensors"));
        let bad_name = bad_path.display().to_string();
        std::fs::write(&bad_path, &bytes).unwrap();
        match catch_unwind(AssertUnwindSafe(|| nn::load(&m, &bad_path))) {
            Err(_) => panics.push(case),
            Ok(Err(e)) => {
                errors += 1;
                let msg = e.to_string();
                assert!(msg.contains(&bad_name), "case {case}: `{msg}` should name the file");
                assert_eq!(snapshot(&m), before, "case {case}: a failed load ({msg}) changed the module");
            }
            Ok(Ok(())) => {
                // Data bytes changed but the file is still valid: put the module back.
                loaded += 1;
                let restore = small(2)?;
                for ((_, dst), (_, src)) in nn::state(&m).iter().zip(nn::state(&restore)) {
                    om_core::no_grad(|| dst.copy_(&src))?;
                }
                assert_eq!(snapshot(&m), before);
            }
        }
        std::fs::remove_file(&bad_path).ok();
    }
    std::fs::remove_dir_all(&dir).ok();
    eprintln!("{CASES} mutated files: {errors} errors, {loaded} valid loads, {} panics", panics.len());
    assert!(panics.is_empty(), "loads panicked in cases {panics:?}");
    assert!(errors > CASES / 2, "most mutations must be caught ({errors} of {CASES})");
    Ok(())
}

/// What the reference crate reads from `bytes`, in our terms: `None` when it refuses the
/// file or when a tensor has a dtype our reader does not take; else each tensor's name,
/// dtype name, shape and bytes, sorted by name.
type Listing = Vec<(String, String, Vec<usize>, Vec<u8>)>;

fn reference(bytes: &[u8]) -> Option<Listing> {
    let st = safetensors::SafeTensors::deserialize(bytes).ok()?;
    let mut out: Listing = st
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, format!("{:?}", view.dtype()), view.shape().to_vec(), view.data().to_vec()))
        .collect();
    out.sort();
    Some(out)
}

/// Tensors as (name, shape, value bits).
type Bits = Vec<(String, Vec<usize>, Vec<u32>)>;

/// Our reader's tensors in the same terms (the stored dtype is `F32` or `I32`).
fn ours(bytes: &[u8]) -> Option<Bits> {
    let map = om_core::io::from_bytes(bytes).ok()?;
    let listing = map.into_iter().map(|(name, t)| {
        let bits = match t.dtype() {
            om_core::DType::F32 => t.to_vec().iter().map(|v| v.to_bits()).collect(),
            om_core::DType::I32 => t.to_vec_i32().iter().map(|&v| v as u32).collect(),
        };
        (name, t.shape().to_vec(), bits)
    });
    Some(listing.collect())
}

/// The reference listing converted as our reader converts (`F64` rounded, `U8`/`I64`
/// widened/narrowed); `None` when our reader must refuse it (another dtype, an `I64`
/// outside `i32`).
fn converted(listing: &Listing) -> Option<Bits> {
    listing
        .iter()
        .map(|(name, dtype, shape, data)| {
            let bits: Vec<u32> = match dtype.as_str() {
                "F32" | "I32" => data.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect(),
                "F64" => data.chunks_exact(8).map(|c| (f64::from_le_bytes(c.try_into().unwrap()) as f32).to_bits()).collect(),
                "U8" => data.iter().map(|&b| b as u32).collect(),
                "I64" => data
                    .chunks_exact(8)
                    .map(|c| i32::try_from(i64::from_le_bytes(c.try_into().unwrap())).ok().map(|v| v as u32))
                    .collect::<Option<_>>()?,
                _ => return None,
            };
            Some((name.clone(), shape.clone(), bits))
        })
        .collect()
}

#[test]
fn our_reader_accepts_what_the_reference_accepts_and_reads_the_same() -> Result<()> {
    const CASES: usize = 4000;
    let dir = std::env::temp_dir().join(format!("om-weights-ref-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("good.safetensors");
    let source = small(1)?;
    nn::save(&source, &path)?;
    let good = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let (header, data) = split(&good);
    let mut g = Gen(23);
    let (mut accepted, mut refused, mut duplicates) = (0usize, 0usize, 0usize);
    for case in 0..CASES {
        let bytes = mutate(&mut g, &good, &header, &data);
        let ours = ours(&bytes);
        match reference(&bytes) {
            None => {
                refused += 1;
                assert!(ours.is_none(), "case {case}: the reference refuses a file our reader accepts");
            }
            Some(listing) => {
                let text = String::from_utf8_lossy(&bytes);
                let names_twice = listing.iter().any(|(n, ..)| text.matches(&format!("\"{n}\"")).count() > 1);
                if names_twice {
                    // The reference keeps the last of duplicate names; ours refuses them.
                    duplicates += 1;
                    assert!(ours.is_none(), "case {case}: a duplicate name was accepted");
                    continue;
                }
                accepted += 1;
                assert_eq!(ours, converted(&listing), "case {case}: our reader disagrees with the reference");
            }
        }
    }
    eprintln!("{CASES} mutated files: reference accepted {accepted}, refused {refused}, {duplicates} with duplicate names");
    assert!(accepted > 100 && refused > CASES / 2, "the mutations must exercise both outcomes");
    Ok(())
}

#[test]
fn our_writer_writes_the_reference_bytes() -> Result<()> {
    use om_core::Tensor;
    // Names that need escaping, non-ASCII names, both dtypes interleaved by name, a scalar,
    // an empty tensor, and a header whose length needs padding.
    let tensors: Vec<(&str, Tensor)> = vec![
        ("b.weight", Tensor::from_vec(vec![1.5, -0.0, f32::NAN, 3.25e-39, 7.0, -2.0], &[2, 3])?),
        ("a.step", Tensor::from_vec_i32(vec![3], &[])?),
        ("quote\"back\\slash\ttab\u{1}", Tensor::from_vec(vec![0.25], &[1])?),
        ("größe", Tensor::from_vec_i32(vec![-1, 2, 3, 4], &[2, 2])?),
        ("empty", Tensor::from_vec(vec![], &[0, 4])?),
        ("z", Tensor::scalar(9.0)),
    ];
    for n in 0..=tensors.len() {
        let subset = &tensors[..n];
        let ours = om_core::io::to_bytes(subset.iter().map(|(k, t)| (*k, t)))?;
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = Vec::new();
        let owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = subset
            .iter()
            .map(|(k, t)| match t.dtype() {
                om_core::DType::F32 => {
                    (k.to_string(), safetensors::Dtype::F32, t.shape().to_vec(), t.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect())
                }
                om_core::DType::I32 => (
                    k.to_string(),
                    safetensors::Dtype::I32,
                    t.shape().to_vec(),
                    t.to_vec_i32().iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
            })
            .collect();
        let mut views = views;
        for (k, d, s, data) in &owned {
            views.push((k.clone(), safetensors::tensor::TensorView::new(*d, s.clone(), data).unwrap()));
        }
        let reference = safetensors::serialize(views, &None).unwrap();
        assert_eq!(ours, reference, "{n} tensors: our bytes differ from the reference's");
        assert_eq!(self::ours(&reference).map(|l| l.len()), Some(n), "{n} tensors: the reference's file reads back");
    }
    Ok(())
}
