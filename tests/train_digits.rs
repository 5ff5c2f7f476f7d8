//! Training end to end: a small conv net built from `om_ops::nn` layers and trained with
//! `om_ops::optim::Adam` on the digits learns far above chance (10%) on held-out images.

use om_core::{io, no_grad, rng::Rng, Compute, Mode, Result, Tensor};
use om_models::DigitNet;
use om_ops as ops;
use om_ops::nn::{Forward, Module};
use om_ops::optim::{Adam, Optimizer};

#[test]
fn a_conv_net_learns_the_digits() -> Result<()> {
    Compute::set_mode(Mode::Fast);
    let data = io::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/digits.safetensors"))?;
    let pixels: Vec<f32> = data["images"].to_vec_i32().into_iter().map(|p| p as f32 / 16.0).collect();
    let labels = data["labels"].to_vec_i32();
    let rows = |n: &str| data[n].to_vec_i32().into_iter().map(|i| i as usize).collect::<Vec<_>>();
    let (mut train, test) = (rows("train_idx"), rows("test_idx"));
    let batch = |rows: &[usize]| -> Result<(Tensor, Vec<i32>)> {
        let x: Vec<f32> = rows.iter().flat_map(|&r| pixels[r * 64..(r + 1) * 64].iter().copied()).collect();
        Ok((Tensor::from_vec(x, &[rows.len(), 1, 8, 8])?, rows.iter().map(|&r| labels[r]).collect()))
    };
    let targets = |y: Vec<i32>| Tensor::from_vec_i32(y.clone(), &[y.len()]);

    let mut net = DigitNet::new([8, 16], 3)?;
    let mut opt = Adam::new(net.parameter_tensors(), 0.01)?;
    let mut rng = Rng::new(11);
    let (mut steps, mut first_loss, mut last_loss) = (0, None, 0.0);
    while steps < 300 {
        for i in (1..train.len()).rev() {
            train.swap(i, rng.below(i + 1));
        }
        for rows in train.chunks(32).filter(|r| r.len() > 1) {
            let (x, y) = batch(rows)?;
            let loss = ops::cross_entropy(&net.forward(&x)?, &targets(y)?, None, Default::default())?;
            opt.zero_grad()?;
            loss.backward()?;
            last_loss = loss.item()?;
            first_loss.get_or_insert(last_loss);
            opt.step()?;
            steps += 1;
        }
    }

    net.set_training(false);
    let (x, y) = batch(&test)?;
    let logits = no_grad(|| net.forward(&x))?.to_vec();
    let correct = logits
        .chunks_exact(10)
        .zip(&y)
        .filter(|(row, &label)| row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b }) == label as usize)
        .count();
    let acc = correct as f64 / test.len() as f64;
    eprintln!("{steps} steps, loss {:.4} → {last_loss:.4}, test accuracy {:.2}%", first_loss.unwrap_or(f32::NAN), 100.0 * acc);
    assert!(last_loss < 0.5 * first_loss.unwrap_or(f32::NAN), "the loss did not fall: {first_loss:?} → {last_loss}");
    assert!(acc >= 0.90, "test accuracy {:.2}% after {steps} steps", 100.0 * acc);
    Ok(())
}
