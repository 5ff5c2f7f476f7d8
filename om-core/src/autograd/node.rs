//! Graph nodes: one allocation per recorded operator holding its input edges and its typed
//! record (until released), behind [`NodeRef`]. When the last reference to a node goes, its
//! record and edges are dropped as before and the emptied allocation is kept per thread and
//! per record type (a [`Recycler`] per node type), so recording the same operators again (a
//! warm step) allocates nothing.

use super::keys::AddrMap;
use super::{lock, Backward, Edge};
use crate::error::Result;
use crate::inline_vec::InlineVec;
use crate::recycle::{reuse, take_last, Recycler};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// The edges a node keeps inline (more inputs spill to the heap): 16 covers every
/// operator, up to `lstm_pair_layer`'s 13 inputs, so a warm step allocates no heap for them.
pub(crate) const INLINE_EDGES: usize = 16;

/// A node's input edges: one per tensor input, `None` where no gradient flows.
pub(crate) type Edges = InlineVec<Option<Edge>, INLINE_EDGES>;

thread_local! {
    /// Emptied nodes (no other reference): a `Recycler<Node<R>>` per node type.
    static RECYCLED: RefCell<AddrMap<TypeId, Box<dyn Any>>> = RefCell::new(AddrMap::default());
    /// What a recycled node's reference holds until the reference is gone.
    static PLACEHOLDER: Arc<dyn GraphNode> = Arc::new(Node::<Placeholder> { name: "", edges: Edges::new(), record: Mutex::new(None) });
}

/// One recorded operator of record type `R`.
struct Node<R> {
    name: &'static str,
    edges: Edges,
    record: Mutex<Option<R>>,
}

/// A node's record, or nothing once released.
pub(crate) trait RecordSlot {
    /// The record, unless released.
    fn get(&self) -> Option<&dyn Backward>;
    /// Drops the record (and the tensors it saved).
    fn release(&mut self);
}

impl<R: Backward> RecordSlot for Option<R> {
    fn get(&self) -> Option<&dyn Backward> {
        self.as_ref().map(|r| r as &dyn Backward)
    }

    fn release(&mut self) {
        *self = None;
    }
}

/// A node of any record type, as the engine sees it.
pub(crate) trait GraphNode: Send + Sync {
    /// The operator's name.
    fn name(&self) -> &'static str;
    /// One edge per tensor input.
    fn edges(&self) -> &[Option<Edge>];
    /// Runs `f` on the record slot, locked.
    fn with_record(&self, f: &mut dyn FnMut(&mut dyn RecordSlot) -> Result<()>) -> Result<()>;
    /// Drops the record (and the tensors it saved) and the edges.
    fn empty(&mut self);
    /// Keeps an emptied node (no other reference) for reuse.
    fn keep(self: Arc<Self>);
}

impl<R: Backward + 'static> GraphNode for Node<R> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn edges(&self) -> &[Option<Edge>] {
        &self.edges
    }

    fn with_record(&self, f: &mut dyn FnMut(&mut dyn RecordSlot) -> Result<()>) -> Result<()> {
        f(&mut *lock(&self.record))
    }

    fn empty(&mut self) {
        drop(self.record.get_mut().unwrap_or_else(|e| e.into_inner()).take());
        drop(std::mem::take(&mut self.edges));
    }

    fn keep(self: Arc<Self>) {
        let _ = RECYCLED.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                let list = r.entry(TypeId::of::<Node<R>>()).or_insert_with(|| Box::new(Recycler::<Node<R>>::new()));
                if let Some(list) = list.downcast_ref::<Recycler<Node<R>>>() {
                    list.push(self);
                }
            }
        });
    }
}

/// The placeholder node's record type: it has no value, so that record is always absent.
enum Placeholder {}

impl Backward for Placeholder {
    fn check_versions(&self) -> Result<()> {
        match *self {}
    }

    fn backward(&self, _: &crate::Tensor, _: &mut super::GradSink) -> Result<()> {
        match *self {}
    }

    fn input_shape(&self, _: usize) -> &[usize] {
        match *self {}
    }
}

/// A shared reference to a node; the last one to go recycles the node.
#[derive(Clone)]
pub(crate) struct NodeRef(Arc<dyn GraphNode>);

impl NodeRef {
    /// A node for `record` with `edges`, in a recycled allocation when this thread has one.
    pub(crate) fn new<R: Backward + 'static>(name: &'static str, edges: Edges, record: R) -> NodeRef {
        let fresh = Node { name, edges, record: Mutex::new(Some(record)) };
        let spare = RECYCLED
            .try_with(|r| r.try_borrow().ok()?.get(&TypeId::of::<Node<R>>())?.downcast_ref::<Recycler<Node<R>>>()?.spare())
            .ok()
            .flatten();
        let node: Arc<Node<R>> = reuse(spare, fresh);
        NodeRef(node)
    }

    /// The node's identity (its address).
    pub(crate) fn key(&self) -> *const () {
        Arc::as_ptr(&self.0).cast()
    }
}

impl std::ops::Deref for NodeRef {
    type Target = dyn GraphNode;
    fn deref(&self) -> &(dyn GraphNode + 'static) {
        &*self.0
    }
}

impl Drop for NodeRef {
    /// The last reference empties the node (its record and edges are dropped here, before the
    /// free list is borrowed: they may release further nodes) and keeps it for reuse.
    fn drop(&mut self) {
        let placeholder = || PLACEHOLDER.try_with(Arc::clone).ok();
        if let Some(emptied) = take_last(&mut self.0, placeholder, |n| n.empty()) {
            emptied.keep();
        }
    }
}
