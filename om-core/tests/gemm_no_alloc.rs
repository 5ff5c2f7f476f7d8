//! A warm `gemm` call allocates nothing, on one thread or several: packing scratch is a
//! thread-local that only grows, and handing chunks to helper threads allocates nothing.

use om_core::compute::{KernelPath, Mode, Settings};
use om_core::kernels::gemm::{gemm, gemm_bias, Bias, MatMut, MatRef};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_calls_do_not_allocate() {
    let (m, k, n) = (150, 600, 130);
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; k * n];
    let mut c = vec![0.0f32; m * n];
    let bias = vec![0.125f32; n];
    for path in KernelPath::supported() {
        for (mode, threads) in [(Mode::Fast, 1), (Mode::Exact, 1), (Mode::Fast, 2), (Mode::Exact, 3)] {
            let settings = Settings { mode, threads, path };
            // Every thread that may run a chunk must have grown its scratch once: a helper
            // joins a call only if it wakes in time, so warm up with many calls.
            for _ in 0..if threads == 1 { 1 } else { 100 } {
                gemm(settings, MatRef::with_stride(&a, m, k, k), MatRef::with_stride(&b, k, n, n), MatMut::with_stride(&mut c, m, n, n));
            }
            let before = ALLOCATIONS.load(Ordering::SeqCst);
            gemm(settings, MatRef::with_stride(&a, m, k, k), MatRef::with_stride(&b, k, n, n), MatMut::with_stride(&mut c, m, n, n));
            let after = ALLOCATIONS.load(Ordering::SeqCst);
            assert_eq!(after, before, "{path} {mode} threads={threads}: warm call allocated");
            // Transposed operands (read in place) and a fused bias allocate nothing either.
            let (at, bt) = (MatRef::row_major(&a, k, m).t(), MatRef::row_major(&b, n, k).t());
            let call = |c: &mut [f32]| gemm_bias(settings, at, bt, MatMut::row_major(c, m, n), Bias::PerCol(&bias));
            for _ in 0..if threads == 1 { 1 } else { 100 } {
                call(&mut c);
            }
            let before = ALLOCATIONS.load(Ordering::SeqCst);
            call(&mut c);
            let after = ALLOCATIONS.load(Ordering::SeqCst);
            assert_eq!(after, before, "{path} {mode} threads={threads}: warm transposed call allocated");
        }
    }
}
