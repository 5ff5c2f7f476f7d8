//! Data-parallel training through the `Communicator` trait: `S` shards give the same bits
//! as `1 × S` gradient accumulation, `2 × S/2` or `S × 1` ranks (threads standing in for
//! processes) at any kernel thread count in exact mode; one shard is the unsharded step
//! bit for bit; without batch norm the sharded gradients are the full batch's (fast mode,
//! within 1e-6 scaled).

use om_core::rng::Rng;
use om_core::{Compute, Mode, Result, Tensor};
use om_dist::{Communicator, DataParallel, Single, ThreadGroup};
use om_models::DigitNet;
use om_ops::nn::{Forward, Linear, Module};
use om_ops::optim::{Adam, Optimizer};

const EXAMPLES: usize = 96;
const BATCH: usize = 24;
const STEPS: usize = 3;

/// Seeded 8×8 images and labels.
fn data() -> (Vec<f32>, Vec<i32>) {
    let mut rng = Rng::new(11);
    let x = (0..EXAMPLES * 64).map(|_| rng.uniform(0.0, 1.0)).collect();
    let y = (0..EXAMPLES).map(|_| rng.below(10) as i32).collect();
    (x, y)
}

fn batch(data: &(Vec<f32>, Vec<i32>), rows: &[usize]) -> Result<(Tensor, Tensor)> {
    let x: Vec<f32> = rows.iter().flat_map(|&r| data.0[r * 64..(r + 1) * 64].iter().copied()).collect();
    let y: Vec<i32> = rows.iter().map(|&r| data.1[r]).collect();
    Ok((Tensor::from_vec(x, &[rows.len(), 1, 8, 8])?, Tensor::from_vec_i32(y, &[rows.len()])?))
}

/// What a run ends with: every step's loss bits and the replica's hash.
type Outcome = (Vec<u32>, u64);

/// Trains a small conv net (batch norm included) for a few Adam steps on one rank.
fn train_rank(comm: impl Communicator, shards: usize, threads: usize) -> Result<Outcome> {
    Compute::set_mode(Mode::Exact);
    Compute::set_threads(threads)?;
    let data = data();
    // every rank but 0 starts from other weights: the broadcast must replace them
    let model = DigitNet::new([4, 8], 3 + comm.rank() as u64)?;
    let mut dp = DataParallel::new(comm, model.parameter_tensors(), model.buffers().into_iter().map(|(_, t)| t).collect(), shards)?;
    let mut opt = Adam::new(model.parameter_tensors(), 0.01)?;
    let order: Vec<usize> = (0..EXAMPLES).collect();
    let mut losses = Vec::new();
    for rows in order.chunks(BATCH).take(STEPS) {
        let loss = dp.step(rows, |shard| {
            let (x, y) = batch(&data, shard)?;
            om_ops::cross_entropy(&model.forward(&x)?, &y, None, Default::default())
        })?;
        opt.step()?;
        losses.push(loss.to_bits());
    }
    dp.check_replicas()?;
    Ok((losses, dp.hash()))
}

/// The run on `ranks` threads (rank 0's outcome; every rank checked its replica).
fn train(ranks: usize, shards: usize, threads: usize) -> Outcome {
    if ranks == 1 {
        return train_rank(Single, shards, threads).unwrap();
    }
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> =
            ThreadGroup::new(ranks).into_iter().map(|c| s.spawn(move || train_rank(c, shards, threads).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(outcomes.iter().all(|o| *o == outcomes[0]), "{outcomes:?}");
    outcomes[0].clone()
}

#[test]
fn four_shards_give_the_same_bits_on_one_two_and_four_ranks_at_any_thread_count() {
    let alone = train(1, 4, 1);
    assert_eq!(train(2, 4, 1), alone);
    assert_eq!(train(4, 4, 1), alone);
    assert_eq!(train(2, 4, 2), alone);
    assert_eq!(train(1, 4, 2), alone);
    // an uneven split (3 shards on 2 ranks) is still the one-process run
    assert_eq!(train(2, 3, 1), train(1, 3, 1));
    // and sharding does change the run (per-shard batch statistics)
    assert_ne!(train(1, 1, 1), alone);
}

#[test]
fn one_shard_is_the_unsharded_step_bit_for_bit() {
    let plain = || -> Result<Outcome> {
        Compute::set_mode(Mode::Exact);
        let data = data();
        let model = DigitNet::new([4, 8], 3)?;
        let mut opt = Adam::new(model.parameter_tensors(), 0.01)?;
        let order: Vec<usize> = (0..EXAMPLES).collect();
        let mut losses = Vec::new();
        for rows in order.chunks(BATCH).take(STEPS) {
            let (x, y) = batch(&data, rows)?;
            let loss = om_ops::cross_entropy(&model.forward(&x)?, &y, None, Default::default())?;
            opt.zero_grad()?;
            loss.backward()?;
            opt.step()?;
            losses.push(loss.item()?.to_bits());
        }
        let dp = DataParallel::new(Single, model.parameter_tensors(), model.buffers().into_iter().map(|(_, t)| t).collect(), 1)?;
        Ok((losses, dp.hash()))
    };
    assert_eq!(train(1, 1, 1), plain().unwrap());
}

#[test]
fn without_batch_norm_sharded_gradients_are_the_full_batch_gradients() -> Result<()> {
    Compute::set_mode(Mode::Fast);
    let data = data();
    let rows: Vec<usize> = (0..30).collect();
    let grads = |shards: usize| -> Result<Vec<Vec<f32>>> {
        let fc = Linear::with_seed(64, 10, true, 5)?;
        let loss = |shard: &[usize]| -> Result<Tensor> {
            let (x, y) = batch(&data, shard)?;
            om_ops::cross_entropy(&fc.forward(&om_ops::reshape(&x, [shard.len() as isize, 64])?)?, &y, None, Default::default())
        };
        if shards == 0 {
            loss(&rows)?.backward()?;
        } else {
            DataParallel::new(Single, fc.parameter_tensors(), vec![], shards)?.step(&rows, loss)?;
        }
        Ok(fc.parameter_tensors().iter().map(|p| p.grad().unwrap().to_vec()).collect())
    };
    let full = grads(0)?;
    for shards in [1, 4, 7] {
        for (a, b) in grads(shards)?.iter().zip(&full) {
            let scale = b.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            let worst = a.iter().zip(b).map(|(a, b)| (a - b).abs() / scale).fold(0.0, f32::max);
            assert!(worst <= 1e-6, "{shards} shards: worst scaled difference {worst:e}");
        }
    }
    Ok(())
}
