//! `onemodel::data`: the loader's batches depend only on the seed and the epoch (not on the
//! thread count), every index comes exactly once per epoch, a saved state continues the
//! same sequence, collation keeps every example's values, `random_split`'s lengths follow
//! PyTorch's rules, and bad input is an `Error` naming the function.

use onemodel::core::rng::Rng;
use onemodel::data::{random_split, random_split_fractions, Collate, DataLoader, Dataset, LoaderState, TensorDataset};
use onemodel::{Compute, Result, Tensor};

/// `n` rows: x = [i, -i] (f32), y = i (i32).
fn rows(n: usize) -> Result<TensorDataset> {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, -(i as f32)]).collect();
    TensorDataset::new(vec![Tensor::from_vec(x, &[n, 2])?, Tensor::from_vec_i32((0..n as i32).collect(), &[n])?])
}

fn epochs(loader: &mut DataLoader<TensorDataset>, n: usize) -> Vec<Vec<Vec<usize>>> {
    (0..n).map(|_| loader.next_batches()).collect()
}

#[test]
fn the_same_seed_gives_the_same_batches_at_any_thread_count() -> Result<()> {
    Compute::set_threads(1)?;
    let a = epochs(&mut DataLoader::new(rows(50)?, 8)?.shuffle(3), 4);
    Compute::set_threads(2)?;
    let b = epochs(&mut DataLoader::new(rows(50)?, 8)?.shuffle(3), 4);
    assert_eq!(a, b);
    let c = epochs(&mut DataLoader::new(rows(50)?, 8)?.shuffle(4), 4);
    assert_ne!(a, c, "another seed gave the same order");
    for e in 1..a.len() {
        assert_ne!(a[e], a[e - 1], "epoch {e} repeated the previous epoch's order");
    }
    Ok(())
}

#[test]
fn the_shuffle_is_fisher_yates_over_the_previous_epochs_order() -> Result<()> {
    // The order `om train` has always used (its exact-mode bits depend on it).
    let mut loader = DataLoader::new(rows(37)?, 37)?.shuffle(9);
    let (mut order, mut rng) = ((0..37).collect::<Vec<usize>>(), Rng::new(9));
    for _ in 0..3 {
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        assert_eq!(loader.next_batches(), vec![order.clone()]);
    }
    Ok(())
}

#[test]
fn every_index_comes_once_per_epoch() -> Result<()> {
    for (n, batch, drop_last) in [(50, 8, false), (50, 8, true), (48, 8, true), (5, 8, false), (5, 8, true), (1, 1, false)] {
        let mut loader = DataLoader::new(rows(n)?, batch)?.shuffle(n as u64).drop_last(drop_last);
        let kept = if drop_last { n / batch * batch } else { n };
        for _ in 0..3 {
            let batches = loader.next_batches();
            assert_eq!(batches.len(), loader.len());
            assert!(batches.iter().all(|b| b.len() == batch || (!drop_last && b.len() == n % batch)), "{batches:?}");
            let mut seen: Vec<usize> = batches.concat();
            assert_eq!(seen.len(), kept);
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), kept, "an index came twice");
            assert!(seen.iter().all(|&i| i < n));
        }
    }
    // Unshuffled: 0..n in order.
    assert_eq!(DataLoader::new(rows(5)?, 2)?.next_batches(), vec![vec![0, 1], vec![2, 3], vec![4]]);
    Ok(())
}

#[test]
fn batches_hold_the_examples_of_their_indices() -> Result<()> {
    let mut loader = DataLoader::new(rows(10)?, 4)?.shuffle(1);
    let order = loader.state().order; // before the epoch: reshuffled by it
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    let mut seen = Vec::new();
    for batch in loader.epoch() {
        let batch = batch?;
        let y = batch[1].to_vec_i32();
        assert_eq!(batch[0].shape(), &[y.len(), 2]);
        let expected: Vec<f32> = y.iter().flat_map(|&i| [i as f32, -(i as f32)]).collect();
        assert_eq!(batch[0].to_vec(), expected);
        seen.extend(y.into_iter().map(|i| i as usize));
    }
    assert_eq!(seen, loader.state().order);
    Ok(())
}

#[test]
fn a_restored_state_continues_the_same_sequence() -> Result<()> {
    let mut a = DataLoader::new(rows(30)?, 7)?.shuffle(5);
    epochs(&mut a, 2);
    let saved = a.state();
    let rest = epochs(&mut a, 3);
    let mut b = DataLoader::new(rows(30)?, 7)?.shuffle(5);
    b.set_state(saved.clone())?;
    assert_eq!(b.epochs(), 2);
    assert_eq!(epochs(&mut b, 3), rest);

    // States that cannot be this loader's are refused, the loader unchanged.
    let mut c = DataLoader::new(rows(30)?, 7)?.shuffle(5);
    let before = c.state();
    let mut bad = saved.clone();
    bad.order[0] = bad.order[1];
    let mut short = saved.clone();
    short.order.pop();
    let unshuffled = LoaderState { rng: None, ..saved.clone() };
    for state in [bad, short, unshuffled] {
        let e = c.set_state(state).unwrap_err().to_string();
        assert!(e.contains("DataLoader::set_state"), "{e}");
        assert_eq!(c.state(), before);
    }
    assert!(DataLoader::new(rows(30)?, 7)?.set_state(saved).is_err(), "an unshuffled loader took a shuffled state");
    Ok(())
}

#[test]
fn collate_stacks_tensors_and_integer_targets() -> Result<()> {
    let (x, y) = Collate::collate(vec![(Tensor::from_vec(vec![1.0, 2.0], &[2])?, 7), (Tensor::from_vec(vec![3.0, 4.0], &[2])?, -1)])?;
    assert_eq!((x.shape(), x.to_vec(), y.shape(), y.to_vec_i32()), (&[2, 2][..], vec![1.0, 2.0, 3.0, 4.0], &[2][..], vec![7, -1]));
    let e = Tensor::collate(vec![Tensor::zeros(&[2])?, Tensor::zeros(&[3])?]).unwrap_err().to_string();
    assert!(e.contains("collate"), "{e}");
    let mixed = vec![Tensor::zeros(&[2])?, Tensor::from_vec_i32(vec![1, 2], &[2])?];
    assert!(Tensor::collate(mixed).unwrap_err().to_string().contains("collate"));
    assert!(Tensor::collate(Vec::new()).unwrap_err().to_string().contains("collate"));
    Ok(())
}

#[test]
fn random_split_lengths_follow_pytorch() -> Result<()> {
    let lens = |parts: &[onemodel::data::Subset<TensorDataset>]| parts.iter().map(Dataset::len).collect::<Vec<_>>();
    // floor(f × n) each, the remainder one by one from the first subset (torch.utils.data.random_split)
    assert_eq!(lens(&random_split_fractions(rows(10)?, &[0.34, 0.33, 0.33], 0)?), vec![4, 3, 3]);
    assert_eq!(lens(&random_split_fractions(rows(5)?, &[0.5, 0.5], 0)?), vec![3, 2]);
    assert_eq!(lens(&random_split_fractions(rows(7)?, &[0.25, 0.25, 0.25, 0.25], 0)?), vec![2, 2, 2, 1]);
    let parts = random_split(rows(20)?, &[5, 0, 15], 3)?;
    assert_eq!(lens(&parts), vec![5, 0, 15]);
    let mut all: Vec<usize> = parts.iter().flat_map(|p| p.indices().to_vec()).collect();
    all.sort();
    assert_eq!(all, (0..20).collect::<Vec<_>>());
    // The subsets read the examples they name.
    let y = parts[0].get(2)?[1].to_vec_i32();
    assert_eq!(y, vec![parts[0].indices()[2] as i32]);
    // Seeded: the same seed, the same subsets.
    assert_eq!(random_split(rows(20)?, &[5, 0, 15], 3)?[0].indices(), parts[0].indices());
    assert_ne!(random_split(rows(20)?, &[5, 0, 15], 4)?[0].indices(), parts[0].indices());
    Ok(())
}

#[test]
fn bad_input_is_an_error_naming_the_function() -> Result<()> {
    let err = |r: Result<()>, name: &str| {
        let e = r.expect_err(name).to_string();
        assert!(e.contains(name), "`{e}` does not name {name}");
    };
    err(DataLoader::new(rows(3)?, 0).map(drop), "DataLoader::new");
    err(DataLoader::new(rows(0)?, 4).map(drop), "DataLoader::new");
    err(TensorDataset::new(vec![Tensor::zeros(&[3, 2])?, Tensor::zeros(&[4])?]).map(drop), "TensorDataset::new");
    err(TensorDataset::new(vec![]).map(drop), "TensorDataset::new");
    err(TensorDataset::new(vec![Tensor::zeros(&[])?]).map(drop), "TensorDataset::new");
    err(rows(3)?.get(3).map(drop), "TensorDataset::get");
    err(random_split(rows(10)?, &[3, 3], 0).map(drop), "random_split");
    err(random_split(rows(10)?, &[usize::MAX, 11], 0).map(drop), "random_split");
    err(random_split_fractions(rows(10)?, &[0.5, 0.4], 0).map(drop), "random_split_fractions");
    err(random_split_fractions(rows(10)?, &[1.5, -0.5], 0).map(drop), "random_split_fractions");
    let mut loader = DataLoader::new(rows(4)?, 2)?;
    err(loader.set_dataset(rows(5)?), "DataLoader::set_dataset");
    Ok(())
}
