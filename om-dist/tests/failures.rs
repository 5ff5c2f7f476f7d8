//! Failures stay contained (issue 22): when one rank of a `ThreadGroup` fails — its loss
//! returns an `Err`, it panics, its model has another size, its batch is shorter than the
//! shard count or differs from the others', or it stops calling collectives — **every**
//! rank's current call returns an `Err` naming the failing rank and the reason, never a
//! hang. Each scenario runs in its own thread under a time limit, so a regression fails
//! the test instead of hanging it.

use om_core::{Error, Result, Tensor};
use om_dist::{Communicator, DataParallel, ThreadGroup};
use om_ops::nn::{Forward, Linear, Module};
use std::sync::mpsc;
use std::time::Duration;

/// Far longer than any scenario takes (each runs in milliseconds).
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `rank(comm)` on every rank of a group of `ranks` threads whose collectives wait
/// at most `timeout`, and returns each rank's result as a string (`Ok` or the error);
/// fails the test if the group has not finished within [`LIMIT`].
fn group(ranks: usize, timeout: Duration, rank: impl Fn(ThreadGroup) -> Result<()> + Send + Sync + 'static) -> Vec<Result<(), String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rank = &rank;
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = ThreadGroup::with_timeout(ranks, timeout).into_iter().map(|c| s.spawn(move || rank(c))).collect();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err("the rank's thread panicked".to_string()),
                })
                .collect()
        });
        let _ = tx.send(results);
    });
    rx.recv_timeout(LIMIT).expect("the ranks hang: a failure on one rank did not reach the others")
}

/// Every rank failed, each with an error containing every one of `words`.
fn all_fail(results: &[Result<(), String>], words: &[&str]) {
    for (r, result) in results.iter().enumerate() {
        let e = result.as_ref().expect_err(&format!("rank {r} succeeded: {results:?}"));
        assert!(words.iter().all(|w| e.contains(w)), "rank {r}: {e:?} lacks one of {words:?}");
    }
}

/// A linear layer `inputs → outputs` (the same seed on every rank).
fn model(outputs: usize) -> Result<Linear> {
    Linear::with_seed(4, outputs, true, 7)
}

/// The mean of the layer's outputs on `rows` examples of ones.
fn mean_output(fc: &Linear, rows: usize) -> Result<Tensor> {
    let x = Tensor::from_vec(vec![1.0; rows * 4], &[rows, 4])?;
    om_ops::mean(&fc.forward(&x)?, None, false)
}

/// `steps` steps of 2 shards on batches of 8; `odd(rank, step, layer)` may replace a
/// shard's loss.
fn train(comm: ThreadGroup, steps: usize, odd: impl Fn(usize, usize, &Linear) -> Option<Result<Tensor>>) -> Result<()> {
    let rank = comm.rank();
    let fc = model(2)?;
    let mut dp = DataParallel::new(comm, fc.parameter_tensors(), vec![], 2)?;
    let batch = [(); 8];
    for step in 0..steps {
        dp.step(&batch, |rows| odd(rank, step, &fc).unwrap_or_else(|| mean_output(&fc, rows.len())))?;
    }
    dp.check_replicas()
}

#[test]
fn a_rank_whose_loss_fails_fails_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        train(c, 3, |rank, step, _| (rank == 1 && step == 1).then(|| Err(Error::argument("my_loss", "no labels for this batch"))))
    });
    all_fail(&results, &["rank 1 failed", "my_loss: no labels for this batch"]);
}

#[test]
fn a_rank_whose_loss_panics_fails_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        train(c, 3, |rank, step, _| {
            if rank == 1 && step == 2 {
                panic!("boom in the loss");
            }
            None
        })
    });
    all_fail(&results, &["rank 1 failed", "panicked: boom in the loss"]);
}

#[test]
fn a_rank_that_panics_between_steps_fails_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let mut dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        for step in 0..3 {
            if rank == 0 && step == 1 {
                panic!("boom between steps");
            }
            dp.step(&[(); 4], |rows| mean_output(&fc, rows.len()))?;
        }
        Ok(())
    });
    assert_eq!(results[0], Err("the rank's thread panicked".to_string()));
    all_fail(&results[1..], &["rank 0 panicked"]);
}

#[test]
fn models_of_different_sizes_fail_every_rank() {
    // rank 1's layer has 3 outputs (15 values), rank 0's 2 (10 values)
    let results = group(2, Duration::from_secs(60), |c| {
        let fc = model(2 + c.rank())?;
        DataParallel::new(c, fc.parameter_tensors(), vec![], 2).map(drop)
    });
    all_fail(&results, &["broadcast: rank 1 has 15 value(s), root 0 sent 10"]);
}

#[test]
fn a_batch_shorter_than_the_shards_fails_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let mut dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        let batch = vec![(); if rank == 1 { 1 } else { 8 }];
        dp.step(&batch, |rows| mean_output(&fc, rows.len())).map(drop)
    });
    all_fail(&results, &["rank 1 failed", "a batch of 1 example(s) cannot be cut into 2 shard(s)"]);
}

#[test]
fn batches_of_different_lengths_fail_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let mut dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        dp.step(&vec![(); 8 + rank], |rows| mean_output(&fc, rows.len())).map(drop)
    });
    all_fail(&results, &["sum_shards: rank 1's shard weights differ from rank 0's"]);
}

#[test]
fn a_rank_that_stops_calling_collectives_fails_every_rank_after_the_timeout() {
    let results = group(2, Duration::from_secs(1), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let mut dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        for step in 0..2 {
            if rank == 1 && step == 1 {
                std::thread::sleep(Duration::from_secs(3)); // stuck, then too late
            }
            dp.step(&[(); 4], |rows| mean_output(&fc, rows.len()))?;
        }
        Ok(())
    });
    all_fail(&results, &["rank 1 did not reach the collective within 1 s"]);
}

#[test]
fn a_rank_that_leaves_early_fails_the_others() {
    let results = group(2, Duration::from_secs(60), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let mut dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        for _ in 0..2 + rank {
            dp.step(&[(); 4], |rows| mean_output(&fc, rows.len()))?;
        }
        Ok(())
    });
    assert_eq!(results[0], Ok(()));
    all_fail(&results[1..], &["rank 0 left the group"]);
}

#[test]
fn the_normal_path_still_agrees() {
    let results = group(2, Duration::from_secs(60), |c| train(c, 3, |_, _, _| None));
    assert_eq!(results, [Ok(()), Ok(())]);
}

#[test]
fn replicas_that_differ_fail_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| {
        let rank = c.rank();
        let fc = model(2)?;
        let dp = DataParallel::new(c, fc.parameter_tensors(), vec![], 2)?;
        if rank == 1 {
            fc.parameter_tensors()[0].update_f32("test", |v| v[0] += 1.0)?;
        }
        dp.check_replicas()
    });
    all_fail(&results, &["DataParallel: rank 1's parameters differ from rank 0's"]);
}

#[test]
fn ranks_in_different_collectives_fail_every_rank() {
    let results = group(2, Duration::from_secs(60), |c| match c.rank() {
        0 => c.barrier(),
        _ => c.gather(&[1.0]).map(drop),
    });
    all_fail(&results, &["rank 1 is in gather, rank 0 in barrier"]);
}
