//! The MPI half of the failure checks (run by `tools/mpi_check.sh`): under
//! `mpirun -np 2`, rank 1 fails in the way named by the argument and every rank must get
//! an `Err` naming rank 1 (each rank prints its error and exits 0 when it got the expected
//! one, 1 otherwise). `stuck` makes rank 1 sleep past a 0.5 s timeout: the job is aborted
//! with a message (a nonzero exit from `mpirun`, never a hang).
//!
//! ```sh
//! cargo build --release --features mpi -p om-dist --example mpi_failures
//! mpirun --oversubscribe -np 2 target/release/examples/mpi_failures error
//! ```

use om_core::{Error, Result, Tensor};
use om_dist::{Communicator, DataParallel, MpiWorld};
use om_ops::nn::{Forward, Linear, Module};
use std::time::Duration;

/// The mean of the layer's outputs on `rows` examples of ones.
fn mean_output(fc: &Linear, rows: usize) -> Result<Tensor> {
    let x = Tensor::from_vec(vec![1.0; rows * 4], &[rows, 4])?;
    om_ops::mean(&fc.forward(&x)?, None, false)
}

/// Three steps of 2 shards on batches of 8 with rank 1 failing as `kind` says.
fn run(world: &MpiWorld, kind: &str) -> Result<()> {
    let bad = world.rank() == 1;
    let fc = Linear::with_seed(4, if bad && kind == "sizes" { 3 } else { 2 }, true, 7)?;
    let mut dp = DataParallel::new(world, fc.parameter_tensors(), vec![], 2)?;
    for step in 0..3 {
        let at = bad && step == 1;
        let batch = vec![
            ();
            if at && kind == "short" {
                1
            } else if at && kind == "weights" {
                9
            } else {
                8
            }
        ];
        if at && kind == "stuck" {
            std::thread::sleep(Duration::from_secs(3));
        }
        dp.step(&batch, |rows| {
            if at && kind == "error" {
                return Err(Error::argument("my_loss", "no labels for this batch"));
            }
            if at && kind == "panic" {
                panic!("boom in the loss");
            }
            mean_output(&fc, rows.len())
        })?;
    }
    dp.check_replicas()
}

fn main() {
    let kind = std::env::args().nth(1).unwrap_or_default();
    let expected = match kind.as_str() {
        "ok" => None,
        "error" => Some("rank 1 failed: my_loss: no labels for this batch"),
        "panic" => Some("rank 1 failed: DataParallel: shard 1's loss panicked: boom in the loss"),
        "sizes" => Some("broadcast: rank 1 has 15 value(s), root 0 sent 10"),
        "short" => Some("rank 1 failed: DataParallel: a batch of 1 example(s) cannot be cut into 2 shard(s)"),
        "weights" => Some("sum_shards: rank 1's shard weights differ from rank 0's"),
        "stuck" => Some("(the job is aborted)"),
        _ => {
            eprintln!("usage: mpi_failures ok|error|panic|sizes|short|weights|stuck");
            std::process::exit(2);
        }
    };
    let mut world = MpiWorld::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    world.set_timeout(Duration::from_millis(if kind == "stuck" { 500 } else { 60_000 }));
    let rank = world.rank();
    let outcome = run(&world, &kind);
    let good = match (&outcome, expected) {
        (Ok(()), None) => true,
        (Err(e), Some(want)) => e.to_string().contains(want),
        _ => false,
    };
    println!("rank {rank}: {} ({outcome:?})", if good { "as expected" } else { "UNEXPECTED" });
    drop(world);
    std::process::exit(if good { 0 } else { 1 });
}
