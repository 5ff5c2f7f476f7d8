//! OCR end to end: a CRNN (conv, batch norm, max-pool, bidirectional `nn::Lstm`, linear)
//! trained briefly with `ctc_loss` on strings of 4–8 digit images placed side by side
//! (training images only) reads held-out strings (test images only) with a character
//! error rate far below chance (greedy decoding; a constant guess errs on ~90% of digits;
//! 250 steps reach about 0.5%, the bound is 25%).

use om_core::{io, no_grad, rng::Rng, Compute, Mode, Result, Tensor};
use om_models::{edit_distance, greedy_decode, Crnn};
use om_ops::nn::{Forward, Module};
use om_ops::optim::{Adam, Optimizer};
use om_ops::{self as ops, Reduction};

const MAX_LEN: usize = 8;
const WIDTH: usize = 8 * MAX_LEN;

#[test]
fn a_crnn_trained_with_ctc_reads_held_out_digit_strings() -> Result<()> {
    Compute::set_mode(Mode::Fast);
    let data = io::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/digits.safetensors"))?;
    let pixels: Vec<f32> = data["images"].to_vec_i32().into_iter().map(|p| p as f32 / 16.0).collect();
    let labels = data["labels"].to_vec_i32();
    let rows = |n: &str| data[n].to_vec_i32().into_iter().map(|i| i as usize).collect::<Vec<_>>();
    let (train, test) = (rows("train_idx"), rows("test_idx"));
    let strings = |pool: &[usize], n: usize, rng: &mut Rng| -> Vec<Vec<usize>> {
        (0..n).map(|_| (0..4 + rng.below(5)).map(|_| pool[rng.below(pool.len())]).collect()).collect()
    };
    // images [B, 1, 8, WIDTH] (zero-padded on the right), padded targets, lengths
    let batch = |ss: &[Vec<usize>]| -> Result<(Tensor, Tensor, Vec<usize>, Vec<usize>)> {
        let mut x = vec![0.0f32; ss.len() * 8 * WIDTH];
        let mut y = vec![0i32; ss.len() * MAX_LEN];
        for (b, s) in ss.iter().enumerate() {
            for (j, &r) in s.iter().enumerate() {
                for row in 0..8 {
                    let dst = b * 8 * WIDTH + row * WIDTH + 8 * j;
                    x[dst..dst + 8].copy_from_slice(&pixels[r * 64 + row * 8..r * 64 + row * 8 + 8]);
                }
                y[b * MAX_LEN + j] = labels[r] + 1;
            }
        }
        Ok((
            Tensor::from_vec(x, &[ss.len(), 1, 8, WIDTH])?,
            Tensor::from_vec_i32(y, &[ss.len(), MAX_LEN])?,
            ss.iter().map(|s| 4 * s.len()).collect(),
            ss.iter().map(Vec::len).collect(),
        ))
    };

    let mut net = Crnn::new(5)?;
    let mut opt = Adam::new(net.parameter_tensors(), 0.005)?;
    let mut rng = Rng::new(13);
    let (mut first_loss, mut last_loss) = (None, 0.0);
    let steps = 250;
    for _ in 0..steps {
        let (x, y, input_lengths, target_lengths) = batch(&strings(&train, 32, &mut rng))?;
        let loss = ops::ctc_loss(&net.forward(&x)?, &y, &input_lengths, &target_lengths, 0, Reduction::Mean, false)?;
        opt.zero_grad()?;
        loss.backward()?;
        opt.step()?;
        last_loss = loss.item()?;
        first_loss.get_or_insert(last_loss);
    }

    net.set_training(false);
    let held_out = strings(&test, 200, &mut Rng::new(99));
    let (x, _, input_lengths, _) = batch(&held_out)?;
    let lp = no_grad(|| net.forward(&x))?;
    let (mut errors, mut chars) = (0, 0);
    for (string, hyp) in held_out.iter().zip(greedy_decode(&lp, &input_lengths)) {
        let reference: Vec<i32> = string.iter().map(|&r| labels[r]).collect();
        errors += edit_distance(&hyp, &reference);
        chars += reference.len();
    }
    let cer = errors as f64 / chars as f64;
    let first = first_loss.unwrap_or(f32::NAN);
    eprintln!("{steps} steps, CTC loss {first:.4} → {last_loss:.4}, held-out CER {:.2}% ({chars} digits)", 100.0 * cer);
    assert!(last_loss < 0.5 * first, "the CTC loss did not fall: {first} → {last_loss}");
    assert!(cer < 0.25, "held-out CER {:.2}% after {steps} steps", 100.0 * cer);
    Ok(())
}
