//! What `#[derive(Module)]` generates: names (prefixes, indices, renames, flatten),
//! parameters versus buffers, skipped and plain-data fields, training mode through every
//! kind of child, tuple and unit structs, generic structs.

use om_core::module::{Forward, Module};
use om_core::{Result, Tensor};
use om_macros::Module;

#[derive(Module)]
struct Norm {
    #[module(param)]
    weight: Tensor,
    #[module(param)]
    bias: Option<Tensor>,
    #[module(buffer)]
    running_mean: Tensor,
    #[module(training)]
    training: bool,
    eps: f32,
    shape: [usize; 2],
}

fn norm(bias: bool) -> Norm {
    Norm {
        weight: Tensor::ones(&[2]).unwrap(),
        bias: bias.then(|| Tensor::zeros(&[2]).unwrap()),
        running_mean: Tensor::zeros(&[2]).unwrap(),
        training: true,
        eps: 1e-5,
        shape: [1, 2],
    }
}

#[derive(Module)]
struct Block {
    norm: Norm,
    #[module(param)]
    scales: Vec<Tensor>,
}

#[derive(Module)]
struct Net {
    stem: Norm,
    blocks: Vec<Block>,
    head: Option<Norm>,
    missing: Option<Norm>,
    pair: [Norm; 2],
    #[module(name = "final")]
    last: Box<Norm>,
    #[module(flatten)]
    inner: Norm,
    #[module(skip)]
    cache: Tensor,
    label: String,
}

fn net() -> Net {
    let block = || Block { norm: norm(false), scales: vec![Tensor::ones(&[1]).unwrap(); 2] };
    Net {
        stem: norm(true),
        blocks: vec![block(), block()],
        head: Some(norm(false)),
        missing: None,
        pair: [norm(false), norm(false)],
        last: Box::new(norm(false)),
        inner: norm(false),
        cache: Tensor::zeros(&[3]).unwrap(),
        label: "net".into(),
    }
}

fn names(list: Vec<(String, Tensor)>) -> Vec<String> {
    list.into_iter().map(|(n, _)| n).collect()
}

fn training_flags(n: &Net) -> Vec<bool> {
    let mut v = vec![n.stem.training];
    v.extend(n.blocks.iter().map(|b| b.norm.training));
    v.extend(n.head.iter().map(|h| h.training));
    v.extend(n.pair.iter().map(|p| p.training));
    v.extend([n.last.training, n.inner.training]);
    v
}

#[test]
fn names_follow_the_fields_in_declaration_order() {
    let n = net();
    assert_eq!(
        names(n.parameters()),
        [
            "stem.weight",
            "stem.bias",
            "blocks.0.norm.weight",
            "blocks.0.scales.0",
            "blocks.0.scales.1",
            "blocks.1.norm.weight",
            "blocks.1.scales.0",
            "blocks.1.scales.1",
            "head.weight",
            "pair.0.weight",
            "pair.1.weight",
            "final.weight",
            "weight",
        ]
    );
    assert_eq!(
        names(n.buffers()),
        [
            "stem.running_mean",
            "blocks.0.norm.running_mean",
            "blocks.1.norm.running_mean",
            "head.running_mean",
            "pair.0.running_mean",
            "pair.1.running_mean",
            "final.running_mean",
            "running_mean",
        ]
    );
    assert_eq!(n.parameter_tensors().len(), 13);
    assert_eq!((n.label.as_str(), n.stem.eps, n.stem.shape, n.cache.shape()), ("net", 1e-5, [1, 2], &[3][..]));
}

#[test]
fn parameters_are_the_fields_own_tensors() {
    let n = net();
    let p = n.parameters();
    n.stem.weight.fill_(5.0).unwrap();
    assert_eq!(p[0].1.to_vec(), vec![5.0, 5.0], "a parameter shares the field's storage");
}

#[test]
fn train_and_eval_reach_every_child() {
    let mut n = net();
    n.eval();
    assert!(training_flags(&n).iter().all(|t| !t), "{:?}", training_flags(&n));
    n.train();
    assert!(training_flags(&n).iter().all(|t| *t));
    n.set_training(false);
    assert!(training_flags(&n).iter().all(|t| !t));
}

#[derive(Module)]
struct Pair(Norm, #[module(buffer)] Tensor);

#[derive(Module)]
struct Nothing;

#[derive(Module)]
struct Wrapper<M> {
    inner: M,
    #[module(param)]
    gain: Tensor,
}

impl<M: Forward> Forward for Wrapper<M> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner.forward(x)
    }
}

impl Forward for Norm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
}

#[test]
fn tuple_unit_and_generic_structs() -> Result<()> {
    let p = Pair(norm(false), Tensor::zeros(&[1])?);
    assert_eq!(names(p.parameters()), ["0.weight"]);
    assert_eq!(names(p.buffers()), ["0.running_mean", "1"]);
    assert!(Nothing.parameters().is_empty() && Nothing.buffers().is_empty());
    let w = Wrapper { inner: norm(true), gain: Tensor::ones(&[1])? };
    assert_eq!(names(w.parameters()), ["inner.weight", "inner.bias", "gain"]);
    let boxed: Box<dyn Forward> = Box::new(w);
    assert_eq!(boxed.parameters().len(), 3);
    assert_eq!(boxed.forward(&Tensor::ones(&[2])?)?.to_vec(), vec![1.0, 1.0]);
    Ok(())
}
