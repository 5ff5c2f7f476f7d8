//! `om train --task digits` (the default): a small conv net (`om_models::DigitNet`)
//! classifying the 8×8 digits, trained on the training images in a seeded shuffle that
//! changes every epoch, evaluated by its accuracy on the test images.

use super::images::Digits;
use super::{Batch, Defaults, Evaluation, Options, Task};
use om_models::DigitNet;
use onemodel::data::{DataLoader, TensorDataset};
use onemodel::ops::nn::{Forward, Module};
use onemodel::{no_grad, ops, Result, Tensor};

/// `om train --task digits`: the conv net, and the training and test images.
pub(crate) struct DigitsTask {
    model: DigitNet,
    /// Images `[N, 1, 8, 8]` and labels `[N]` of the training split, in the file's order.
    train: (Tensor, Tensor),
    /// The test split, in one batch.
    test: DataLoader<TensorDataset>,
}

impl Task for DigitsTask {
    type Data = TensorDataset;
    const NAME: &'static str = "digits";
    const DEFAULTS: Defaults = Defaults { epochs: 12, lr: 0.01, plot: "train.png", weights: "digits.safetensors" };
    const UNIT: &'static str = "images";
    const LOSS: &'static str = "loss";
    const CURVE_TITLES: (&'static str, &'static str) = ("training loss (cross-entropy)", "test accuracy (%)");

    fn new(o: &Options) -> Result<DigitsTask> {
        let data = Digits::load()?;
        let (x, y) = data.tensors(&data.test)?;
        let test = DataLoader::new(TensorDataset::new(vec![x, y])?, data.test.len())?;
        Ok(DigitsTask { model: DigitNet::new([16, 32], o.seed)?, train: data.tensors(&data.train)?, test })
    }

    fn describe(&self) -> String {
        let n_params: usize = self.model.parameters().iter().map(|(_, t)| t.numel()).sum();
        format!(
            "om train: digits conv net ({n_params} parameters), {} train / {} test images",
            self.train.1.numel(),
            self.test.dataset().tensors()[1].numel()
        )
    }

    fn model(&self) -> &dyn Module {
        &self.model
    }

    /// The training images reshuffled every epoch by the loader's generator, seeded with
    /// `--seed`.
    fn loader(&self, o: &Options) -> Result<DataLoader<TensorDataset>> {
        let (x, y) = self.train.clone();
        Ok(DataLoader::new(TensorDataset::new(vec![x, y])?, o.batch)?.shuffle(o.seed))
    }

    fn loss(&mut self, batch: Batch<Self>) -> Result<Tensor> {
        ops::cross_entropy(&self.model.forward(&batch[0])?, &batch[1], None, Default::default())
    }

    /// The fraction of test images whose arg-max logit is the label.
    fn evaluate(&mut self) -> Result<Evaluation> {
        self.model.set_training(false);
        let (mut correct, mut total) = (0usize, 0usize);
        let mut outcome = Ok(());
        for batch in self.test.epoch() {
            let counted = batch.and_then(|b| {
                let logits = no_grad(|| self.model.forward(&b[0]))?;
                Ok((count_correct(&logits, &b[1]), b[1].numel()))
            });
            match counted {
                Ok((c, n)) => (correct, total) = (correct + c, total + n),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        self.model.set_training(true);
        outcome?;
        let acc = 100.0 * correct as f64 / total as f64;
        Ok(Evaluation { metric: acc, line: format!("test accuracy {acc:.2}%") })
    }

    fn metric_range(&self, accuracies: &[f64]) -> std::ops::Range<f64> {
        accuracies.iter().copied().fold(100.0, f64::min).min(90.0).floor()..100.0
    }

    fn summary(&self, last: &Evaluation, wall: f64) -> String {
        format!("test accuracy {:.2}% ({} images), wall time {wall:.2} s", last.metric, self.test.dataset().tensors()[1].numel())
    }
}

/// The rows of `logits` whose arg-max (the first on ties) is the label.
fn count_correct(logits: &Tensor, labels: &Tensor) -> usize {
    let classes = logits.shape()[1];
    logits.with_f32(|l| {
        labels.with_i32(|y| {
            l.chunks_exact(classes)
                .zip(y)
                .filter(|(row, &label)| {
                    let best = row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
                    best as i32 == label
                })
                .count()
        })
    })
}
