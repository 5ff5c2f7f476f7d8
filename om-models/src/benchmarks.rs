//! The three benchmark training steps of `shared/BENCHMARKS.md` (convnet, encoder,
//! crnn_ctc), layer for layer, with seeded random weights and inputs. `om bench step`,
//! the criterion benches and `tools/compare_steps.sh` time [`BenchStep::step`]; the same
//! models in PyTorch live in `tools/bench_steps_torch.py`.
//!
//! A step is what a training loop does before the optimizer: clear the parameter
//! gradients, forward, loss, backward.

use om_core::rng::Rng;
use om_core::{Result, Tensor};
use om_ops::nn::{BatchNorm2d, Conv2d, Conv2dOptions, Embedding, Forward, LayerNorm, Linear, Lstm, Module};
use om_ops::{self as ops, GeluForm, Reduction, RnnConfig};

/// Which benchmark model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchModel {
    /// Conv-BN-ReLU-pool ×2, conv-ReLU, global average pool, linear; `[32, 3, 32, 32]`.
    Convnet,
    /// Embedding and two post-norm transformer layers; token ids `[16, 64]`.
    Encoder,
    /// Conv-ReLU-pool ×2, 2-layer bidirectional LSTM, linear, CTC; images `[8, 1, 32, 128]`.
    CrnnCtc,
}

impl BenchModel {
    /// Every model, in the order of BENCHMARKS.md.
    pub const ALL: [BenchModel; 3] = [BenchModel::Convnet, BenchModel::Encoder, BenchModel::CrnnCtc];

    /// `convnet`, `encoder` or `crnn_ctc`.
    pub fn name(self) -> &'static str {
        match self {
            BenchModel::Convnet => "convnet",
            BenchModel::Encoder => "encoder",
            BenchModel::CrnnCtc => "crnn_ctc",
        }
    }

    /// Parses a name printed by [`BenchModel::name`].
    pub fn parse(s: &str) -> Option<BenchModel> {
        BenchModel::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A benchmark model with its fixed batch, ready to run training steps.
pub struct BenchStep {
    net: Net,
    params: Vec<Tensor>,
}

enum Net {
    Convnet(Convnet),
    Encoder(Encoder),
    CrnnCtc(CrnnCtc),
}

impl BenchStep {
    /// The model's weights and one batch, all drawn from `seed`.
    pub fn new(model: BenchModel, seed: u64) -> Result<BenchStep> {
        let (net, params) = match model {
            BenchModel::Convnet => {
                let m = Convnet::new(seed)?;
                let p = m.parameter_tensors();
                (Net::Convnet(m), p)
            }
            BenchModel::Encoder => {
                let m = Encoder::new(seed)?;
                let p = m.parameter_tensors();
                (Net::Encoder(m), p)
            }
            BenchModel::CrnnCtc => {
                let m = CrnnCtc::new(seed)?;
                let p = m.parameter_tensors();
                (Net::CrnnCtc(m), p)
            }
        };
        Ok(BenchStep { net, params })
    }

    /// The parameters (what an optimizer would update).
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    /// One step: clear the gradients, forward, loss, backward. Returns the loss.
    pub fn step(&self) -> Result<f32> {
        for p in &self.params {
            p.clear_grad();
        }
        let loss = match &self.net {
            Net::Convnet(m) => m.loss()?,
            Net::Encoder(m) => m.loss()?,
            Net::CrnnCtc(m) => m.loss()?,
        };
        loss.backward()?;
        loss.item()
    }
}

/// Random class labels in `0..classes`.
fn labels(n: usize, classes: usize, rng: &mut Rng) -> Result<Tensor> {
    Tensor::from_vec_i32((0..n).map(|_| rng.below(classes) as i32).collect(), &[n])
}

fn conv3x3(cin: usize, cout: usize, seed: u64) -> Result<Conv2d> {
    Conv2d::with_seed(cin, cout, [3, 3], Conv2dOptions::default().padding(1), seed)
}

fn max_pool_2x2(x: &Tensor) -> Result<Tensor> {
    ops::max_pool2d(x, 2)
}

/// The convnet benchmark.
#[derive(Module)]
struct Convnet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    conv3: Conv2d,
    fc: Linear,
    #[module(skip)]
    x: Tensor,
    #[module(skip)]
    y: Tensor,
}

impl Convnet {
    fn new(seed: u64) -> Result<Convnet> {
        let mut rng = Rng::new(seed);
        Ok(Convnet {
            conv1: conv3x3(3, 32, seed)?,
            bn1: BatchNorm2d::new(32)?,
            conv2: conv3x3(32, 64, seed + 1)?,
            bn2: BatchNorm2d::new(64)?,
            conv3: conv3x3(64, 128, seed + 2)?,
            fc: Linear::with_seed(128, 10, true, seed + 3)?,
            x: Tensor::randn_with_seed(&[32, 3, 32, 32], seed + 4)?,
            y: labels(32, 10, &mut rng)?,
        })
    }

    fn loss(&self) -> Result<Tensor> {
        let h = max_pool_2x2(&ops::relu(&self.bn1.forward(&self.conv1.forward(&self.x)?)?)?)?;
        let h = max_pool_2x2(&ops::relu(&self.bn2.forward(&self.conv2.forward(&h)?)?)?)?;
        let h = ops::global_avg_pool2d(&ops::relu(&self.conv3.forward(&h)?)?)?;
        let logits = self.fc.forward(&ops::reshape(&h, [32, 128])?)?;
        ops::cross_entropy(&logits, &self.y, None, Default::default())
    }
}

/// Width, heads, feed-forward width, sequence length and batch of the encoder benchmark.
const E: usize = 256;
const HEADS: usize = 4;
const FF: usize = 1024;
const T: usize = 64;
const B: usize = 16;

/// One post-norm transformer layer of the encoder benchmark.
#[derive(Module)]
struct EncoderLayer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    norm1: LayerNorm,
    ff1: Linear,
    ff2: Linear,
    norm2: LayerNorm,
}

impl EncoderLayer {
    fn new(seed: u64) -> Result<EncoderLayer> {
        Ok(EncoderLayer {
            q: Linear::with_seed(E, E, true, seed)?,
            k: Linear::with_seed(E, E, true, seed + 1)?,
            v: Linear::with_seed(E, E, true, seed + 2)?,
            o: Linear::with_seed(E, E, true, seed + 3)?,
            norm1: LayerNorm::new(E)?,
            ff1: Linear::with_seed(E, FF, true, seed + 4)?,
            ff2: Linear::with_seed(FF, E, true, seed + 5)?,
            norm2: LayerNorm::new(E)?,
        })
    }

    /// `x` `[B, T, E]` → `[B, T, E]`.
    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let d = E / HEADS;
        let heads = |t: Tensor| ops::permute(&ops::reshape(&t, [B as isize, T as isize, HEADS as isize, d as isize])?, [0, 2, 1, 3]);
        let q = heads(self.q.forward(x)?)?;
        let k = heads(self.k.forward(x)?)?;
        let v = heads(self.v.forward(x)?)?;
        let a = ops::attention(&q, &k, &v, Some(mask), 1.0 / (d as f32).sqrt())?;
        let a = ops::reshape(&ops::permute(&a, [0, 2, 1, 3])?, [B as isize, T as isize, E as isize])?;
        let x = self.norm1.forward(&ops::add(x, &self.o.forward(&a)?)?)?;
        let f = self.ff2.forward(&ops::gelu(&self.ff1.forward(&x)?, GeluForm::Erf)?)?;
        self.norm2.forward(&ops::add(&x, &f)?)
    }
}

/// The encoder benchmark.
#[derive(Module)]
struct Encoder {
    embed: Embedding,
    layers: [EncoderLayer; 2],
    head: Linear,
    #[module(skip)]
    ids: Tensor,
    #[module(skip)]
    mask: Tensor,
    #[module(skip)]
    y: Tensor,
}

impl Encoder {
    fn new(seed: u64) -> Result<Encoder> {
        let mut rng = Rng::new(seed);
        let ids = Tensor::from_vec_i32((0..B * T).map(|_| rng.below(1000) as i32).collect(), &[B, T])?;
        Ok(Encoder {
            embed: Embedding::with_seed(1000, E, None, seed)?,
            layers: [EncoderLayer::new(seed + 10)?, EncoderLayer::new(seed + 20)?],
            head: Linear::with_seed(E, 10, true, seed + 30)?,
            ids,
            mask: Tensor::zeros(&[T, T])?,
            y: labels(B, 10, &mut rng)?,
        })
    }

    fn loss(&self) -> Result<Tensor> {
        let mut x = self.embed.forward(&self.ids)?;
        for layer in &self.layers {
            x = layer.forward(&x, &self.mask)?;
        }
        let logits = self.head.forward(&ops::mean(&x, Some(1), false)?)?;
        ops::cross_entropy(&logits, &self.y, None, Default::default())
    }
}

/// Classes (blank 0), batch and frames of the crnn_ctc benchmark.
const CTC_CLASSES: usize = 37;
const CTC_BATCH: usize = 8;
const FRAMES: usize = 32;

/// The crnn_ctc benchmark.
#[derive(Module)]
struct CrnnCtc {
    conv1: Conv2d,
    conv2: Conv2d,
    rnn: Lstm,
    fc: Linear,
    #[module(skip)]
    x: Tensor,
    #[module(skip)]
    targets: Tensor,
    target_lengths: Vec<usize>,
}

impl CrnnCtc {
    fn new(seed: u64) -> Result<CrnnCtc> {
        let mut rng = Rng::new(seed);
        let target_lengths: Vec<usize> = (0..CTC_BATCH).map(|_| 5 + rng.below(7)).collect();
        let total = target_lengths.iter().sum::<usize>();
        let targets = Tensor::from_vec_i32((0..total).map(|_| 1 + rng.below(CTC_CLASSES - 1) as i32).collect(), &[total])?;
        let config = RnnConfig { layers: 2, bidirectional: true, batch_first: false };
        Ok(CrnnCtc {
            conv1: conv3x3(1, 32, seed)?,
            conv2: conv3x3(32, 64, seed + 1)?,
            rnn: Lstm::with_seed(64 * 8, 128, config, seed + 2)?,
            fc: Linear::with_seed(256, CTC_CLASSES, true, seed + 3)?,
            x: Tensor::randn_with_seed(&[CTC_BATCH, 1, 32, 128], seed + 4)?,
            targets,
            target_lengths,
        })
    }

    fn loss(&self) -> Result<Tensor> {
        let h = max_pool_2x2(&ops::relu(&self.conv1.forward(&self.x)?)?)?;
        let h = max_pool_2x2(&ops::relu(&self.conv2.forward(&h)?)?)?;
        // [B, 64, 8, 32] → [W = 32, B, 64·8]: the same values as `permute(h, [3, 0, 1, 2])`
        // reshaped, written as one 2-d transpose `[B·64·8, W] → [W, B·64·8]` made contiguous
        // here (a tiled copy), so the LSTM's forward and backward read plain rows instead of
        // gathering a 4-d strided view element by element each time (2% of the step, `perf`).
        let rows = ops::reshape(&h, [-1, FRAMES as isize])?;
        let frames = ops::reshape(&ops::contiguous(&ops::transpose(&rows, 0, 1)?)?, [FRAMES as isize, CTC_BATCH as isize, -1])?;
        let y = self.rnn.forward(&frames, None, None)?.y;
        let log_probs = ops::log_softmax(&self.fc.forward(&y)?, -1)?;
        let input_lengths = [FRAMES; CTC_BATCH];
        ops::ctc_loss(&log_probs, &self.targets, &input_lengths[..], &self.target_lengths, 0, Reduction::Mean, false)
    }
}
