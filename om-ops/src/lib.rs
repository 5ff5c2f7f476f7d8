//! # om-ops
//!
//! Every operator of OneModel, each declared once with `#[op]` in the file of its family.
//! The declaration generates the public function (re-exported here), the backward record,
//! the dispatch and the registered gradient-check cases.

pub mod conv;
pub mod ctc;
pub mod elementwise;
pub mod linalg;
pub mod lookup;
pub mod loss;
pub mod losses;
pub mod math;
pub mod methods;
pub mod models;
pub mod nn;
pub mod norm;
pub mod optim;
pub mod pool;
pub mod probability;
pub mod recurrent;
pub mod reduce;
pub mod reductions;
pub mod spatial;
pub mod transformer;
pub mod views;

#[cfg(test)]
mod oracle;

pub use conv::conv2d;
pub use ctc::{ctc_loss, Lengths, Reduction};
pub use elementwise::{add, div, gelu, mul, neg, relu, sigmoid, sub, tanh, GeluForm};
pub use linalg::{linear, matmul};
pub use lookup::embedding;
pub use loss::{cross_entropy, nll_loss};
pub use losses::{binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div, l1_loss, mse_loss, smooth_l1_loss};
pub use math::{
    abs, add_scalar, clamp, div_scalar, exp, leaky_relu, log, maximum, minimum, mul_scalar, pow_scalar, rdiv_scalar, rsqrt, rsub_scalar,
    silu, softplus, sqrt, sub_scalar, where_,
};
pub use methods::TensorOps;
pub use norm::{batch_norm2d, layer_norm};
pub use pool::{avg_pool2d, global_avg_pool2d, max_pool2d};
pub use probability::{log_softmax, softmax};
pub use recurrent::{gru, gru_layer, lstm, lstm_layer, RnnConfig, RnnOutput, RnnWeights};
pub use reduce::{mean, sum};
pub use reductions::{amax, amin, argmax, argmin, logsumexp, max_dim, mean_axes, min_dim, std_dev, sum_axes, take_along_axis, var};
pub use spatial::{conv_transpose2d, resize2d, ResizeMode};
pub use transformer::attention;
pub use views::{cast, concat, contiguous, expand, flip, permute, reshape, select, slice, squeeze, transpose, unsqueeze};

pub use om_core::{Error, Result, Tensor};

/// The operator names declared in this crate, by family. Calling this also makes sure the
/// crate (and so every `inventory` registration in it) is linked into the binary.
pub fn declared_names() -> Vec<&'static str> {
    [
        conv::NAMES,
        ctc::NAMES,
        elementwise::NAMES,
        linalg::NAMES,
        lookup::NAMES,
        loss::NAMES,
        math::NAMES,
        losses::NAMES,
        norm::NAMES,
        pool::NAMES,
        probability::NAMES,
        recurrent::NAMES,
        reduce::NAMES,
        reductions::NAMES,
        spatial::NAMES,
        transformer::NAMES,
        views::NAMES,
    ]
    .concat()
}
