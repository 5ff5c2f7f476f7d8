//! Running a kernel's chunks on several threads: [`for_each_chunk`] (the calling thread
//! takes part, helpers join through a shared chunk counter) and [`for_each_chunk_mut`]
//! (disjoint mutable chunks of one slice, on top of it), and their `_scratch` forms, which
//! hand each participating thread its own part of a scratch slice the caller took up front
//! ([`for_each_chunk_scratch`], [`for_each_chunk_mut_scratch`]). All use the one thread team
//! of the process, so there are never more runnable threads than the thread setting; a call
//! made from inside a chunk (or while another caller owns the team) runs on its own thread.
//! Chunks are always a function of the kernel and the shape; threads only decide who runs
//! which. This is the one place outside the arithmetic kernels that needs `unsafe` (a
//! job's lifetime is erased while helpers run it; see `Team::run`; the scratch and the
//! mutable chunks are handed out as disjoint slices of one base pointer).
//!
//! **No pool memory inside a chunk.** How many chunks run at the same time depends on
//! when the helpers wake, so a pooled buffer taken inside a chunk would make the number of
//! buffers of its size class outstanding at once (and so the pool memory a step needs)
//! depend on thread timing: a warm step could then allocate once in a while (issue 22).
//! A kernel therefore takes the scratch of a parallel section on the calling thread, before
//! it, sized for [`workers`]`(threads, chunks)` threads (a function of the shape and the
//! thread setting only), and each thread uses its own part; a GEMM run inside a chunk of a
//! parallel section takes its padded copy of C from that part
//! ([`gemm_with_scratch`](crate::kernels::gemm::gemm_with_scratch)) or computes C in place,
//! never through the pool ([`in_parallel_chunk`]). So a helper thread holds no pool buffer
//! at all, and the section's buffers are the caller's, given back when the caller drops
//! them. Debug builds assert this in [`Buffer::try_new`](crate::pool::Buffer::try_new).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The most threads that take part in a parallel section of `chunks` chunks at `threads`
/// threads: `min(threads, chunks)`, and 1 when either is at most 1 (the section then runs
/// on the calling thread). A kernel sizes the scratch of a `_scratch` section with it.
pub fn workers(threads: usize, chunks: usize) -> usize {
    if threads <= 1 || chunks <= 1 {
        1
    } else {
        threads.min(chunks)
    }
}

thread_local! {
    /// How many chunks of parallel sections (more than one worker by the thread setting)
    /// this thread is inside (a chunk may start a nested section).
    static IN_CHUNK: Cell<usize> = const { Cell::new(0) };
}

/// Whether this thread is running a chunk of a parallel section, i.e. one started with
/// more than one thread and more than one chunk (whether or not helpers joined it). Code
/// that may run there (a GEMM inside a convolution's chunk) must not take pool memory.
pub fn in_parallel_chunk() -> bool {
    IN_CHUNK.with(|c| c.get() > 0)
}

/// Marks this thread as inside a chunk of a parallel section until dropped.
struct InChunk;

impl InChunk {
    fn enter() -> InChunk {
        IN_CHUNK.with(|c| c.set(c.get() + 1));
        InChunk
    }
}

impl Drop for InChunk {
    fn drop(&mut self) {
        IN_CHUNK.with(|c| c.set(c.get() - 1));
    }
}

/// Runs `f(chunk)` for every chunk in `0..chunks`, on `threads` threads.
///
/// The chunks must be a function of the kernel and the shape only; which thread runs a
/// chunk is not specified, so `f` must write disjoint outputs per chunk, and it must not
/// take pool memory (see the module documentation; use [`for_each_chunk_scratch`]).
///
/// The calling thread takes part: it posts the job to `threads - 1` helper threads and
/// claims chunks itself from a shared counter, as do the helpers once they wake up. The
/// caller then waits only for helpers still inside a chunk, never for one to wake, so a
/// late helper costs nothing but its share. A warm call allocates nothing. If another
/// caller is using the helpers, this call runs all its chunks on the calling thread.
pub fn for_each_chunk(threads: usize, chunks: usize, f: impl Fn(usize) + Sync + Send) {
    run_section(threads, chunks, |_, chunk| f(chunk));
}

/// Runs `f(worker, chunk)` for every chunk in `0..chunks`, on `threads` threads: the body
/// of [`for_each_chunk`]. Each thread taking part draws its `worker` index once, from a
/// counter of its own call, so the indices are distinct, below
/// [`workers`]`(threads, chunks)`, and each is used by one thread only.
fn run_section(threads: usize, chunks: usize, f: impl Fn(usize, usize) + Sync + Send) {
    let next = AtomicUsize::new(0);
    let joined = AtomicUsize::new(0);
    let parallel = workers(threads, chunks) > 1;
    let scope = crate::scope::Inherited::capture(); // helpers account to the caller's scope
    let work = || {
        let _adopted = scope.adopt();
        let _inside = parallel.then(InChunk::enter);
        let worker = joined.fetch_add(1, Ordering::Relaxed);
        loop {
            let chunk = next.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                break;
            }
            f(worker, chunk);
        }
    };
    if !parallel {
        work();
        return;
    }
    // The caller and at most `threads.min(chunks) - 1` helpers run `work`, so at most
    // `workers(threads, chunks)` indices are drawn.
    Team::get().run(threads.min(chunks) - 1, &work);
}

/// Helper threads for [`for_each_chunk`], shared by all callers (one caller at a time).
struct Team {
    /// Held by the caller that owns the team during one call; holds the number of helper
    /// threads spawned so far (they are spawned on first need and never exit).
    owner: Mutex<usize>,
    slot: Mutex<Slot>,
    /// Signals a new job to sleeping helpers.
    wake: std::sync::Condvar,
    /// Signals the caller that the last running helper finished.
    done: std::sync::Condvar,
    /// Bumped (under the `slot` lock) for each posted job; spinning helpers watch it.
    generation: std::sync::atomic::AtomicU64,
    /// Helpers inside the current job: raised under the `slot` lock when one joins, lowered
    /// (without it) when one is done with the job, so the caller can poll it.
    running: std::sync::atomic::AtomicUsize,
}

/// The posted job and the helpers' bookkeeping.
struct Slot {
    job: Option<TeamJob>,
    /// Helpers that may still join the current job.
    wanted: usize,
    /// Helpers waiting on `wake`.
    sleeping: usize,
    /// A helper's run of the job panicked.
    panicked: bool,
}

/// A job with its lifetime erased; see [`Team::run`] for why this is sound.
#[derive(Clone, Copy)]
struct TeamJob(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync`, and it is only called while the posting caller keeps it
// alive (see `Team::run`).
unsafe impl Send for TeamJob {}

/// How long an idle helper polls for the next job before it sleeps. Measured 2026-12-02 on
/// an Intel Xeon model 167 (2 shared cores): the convnet step at 2 threads took 1.007× (10 µs)
/// and 1.05× (200 µs) the time of 50 µs (medians of 7 interleaved `om bench step` runs;
/// docs/performance.md, "Tuning constants").
const HELPER_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

impl Team {
    fn get() -> &'static Team {
        static TEAM: OnceLock<Team> = OnceLock::new();
        TEAM.get_or_init(|| Team {
            owner: Mutex::new(0),
            slot: Mutex::new(Slot { job: None, wanted: 0, sleeping: 0, panicked: false }),
            wake: std::sync::Condvar::new(),
            done: std::sync::Condvar::new(),
            generation: std::sync::atomic::AtomicU64::new(0),
            running: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` on the calling thread and on up to `helpers` helper threads, and returns
    /// once every helper that started it has finished.
    fn run(&'static self, helpers: usize, work: &(dyn Fn() + Sync)) {
        let mut spawned = match self.owner.try_lock() {
            Ok(guard) => guard,
            // A chunk panicked during an earlier call; the count is still right.
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                work();
                return;
            }
        };
        while *spawned < helpers {
            let name = format!("om-helper-{}", *spawned);
            if std::thread::Builder::new().name(name).spawn(move || self.helper()).is_err() {
                break;
            }
            *spawned += 1;
        }
        // SAFETY (lifetime erasure): helpers only call the job between this post and
        // `Finish::drop` below, which withdraws it and waits until no helper is running it,
        // also when `work` unwinds; so `work` outlives every call through the pointer.
        let job = TeamJob(unsafe { std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(work) });
        let sleeping = {
            let mut slot = self.slot();
            *slot = Slot { job: Some(job), wanted: helpers.min(*spawned), panicked: false, ..*slot };
            self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
            slot.sleeping
        };
        if sleeping > 0 {
            self.wake.notify_all();
        }
        /// Withdraws the job and waits for the helpers running it: polls for
        /// [`HELPER_SPIN`] (the last chunks usually end within it, and a sleeping caller
        /// would pay a wake-up), then sleeps.
        struct Finish(&'static Team);
        impl Drop for Finish {
            fn drop(&mut self) {
                use std::sync::atomic::Ordering::SeqCst;
                let team = self.0;
                team.slot().wanted = 0;
                let start = std::time::Instant::now();
                while team.running.load(SeqCst) > 0 && start.elapsed() < HELPER_SPIN {
                    for _ in 0..64 {
                        std::hint::spin_loop();
                    }
                }
                let mut slot = team.slot();
                while team.running.load(SeqCst) > 0 {
                    slot = team.done.wait(slot).unwrap_or_else(|e| e.into_inner());
                }
                slot.job = None;
            }
        }
        let finish = Finish(self);
        work();
        drop(finish);
        let panicked = std::mem::take(&mut self.slot().panicked);
        drop(spawned);
        assert!(!panicked, "for_each_chunk: a chunk panicked on a helper thread");
    }

    /// A helper thread: polls for a job for [`HELPER_SPIN`], then sleeps until one is posted.
    fn helper(&self) {
        // Sized once, now: which GEMMs a helper happens to join depends on timing, so a
        // scratch grown on demand would make a warm step's heap use depend on it too.
        crate::kernels::gemm::reserve_packing_scratch();
        let mut seen = self.generation.load(Ordering::Acquire);
        loop {
            let start = std::time::Instant::now();
            'spin: while self.generation.load(Ordering::Acquire) == seen {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                if start.elapsed() > HELPER_SPIN {
                    break 'spin;
                }
            }
            let mut slot = self.slot();
            while self.generation.load(Ordering::Relaxed) == seen {
                slot.sleeping += 1;
                slot = self.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                slot.sleeping -= 1;
            }
            seen = self.generation.load(Ordering::Relaxed);
            let Some(job) = slot.job.filter(|_| slot.wanted > 0) else { continue };
            slot.wanted -= 1;
            self.running.fetch_add(1, Ordering::SeqCst);
            drop(slot);
            // SAFETY: the job stays alive until `running` drops back to zero (`Team::run`).
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*job.0)() })).is_ok();
            if !ok {
                self.slot().panicked = true;
            }
            // The last access to the job; the caller may return once `running` is zero.
            if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                // Under the lock, so a caller between its check and its wait cannot miss it.
                let _slot = self.slot();
                self.done.notify_all();
            }
        }
    }
}

/// A slice's base pointer, shared by the threads of a section (each touches only its own
/// range).
struct Base<T>(*mut T);

// SAFETY: the slices built from it are disjoint `&mut [T]` with `T: Send` (see the
// functions below), so handing the pointer to other threads is as sound as handing them
// those slices.
unsafe impl<T: Send> Sync for Base<T> {}

impl<T> Base<T> {
    /// The pointer itself (a method, so closures capture the whole `Sync` wrapper).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

/// Panics unless `scratch` holds `workers` parts of `per_worker` values.
fn check_scratch<S>(scratch: &[S], workers: usize, per_worker: usize) {
    assert!(
        workers.checked_mul(per_worker).is_some_and(|n| n <= scratch.len()),
        "parallel scratch: {} value(s) for {workers} part(s) of {per_worker}",
        scratch.len()
    );
}

/// As [`for_each_chunk`], and `f(chunk, part)` also gets the running thread's own part of
/// `scratch`: `scratch` holds [`workers`]`(threads, chunks)` parts of `per_worker` values
/// (taken by the caller before the section, on its own thread), and each thread taking
/// part uses one of them for all the chunks it runs. The part keeps what the thread's
/// previous chunk left in it.
///
/// Panics if `scratch` holds fewer than `workers(threads, chunks) · per_worker` values.
pub fn for_each_chunk_scratch<S: Send>(
    threads: usize,
    chunks: usize,
    scratch: &mut [S],
    per_worker: usize,
    f: impl Fn(usize, &mut [S]) + Sync + Send,
) {
    check_scratch(scratch, workers(threads, chunks), per_worker);
    let base = Base(scratch.as_mut_ptr());
    let base = &base;
    run_section(threads, chunks, |worker, chunk| {
        // SAFETY: `worker < workers(threads, chunks)` (see `run_section`), so the part
        // `worker·per_worker..+per_worker` lies in `scratch` (checked above); each index is
        // used by one thread only, which runs its chunks one after another, so no two live
        // slices overlap; `scratch` is borrowed mutably for the whole call.
        let part = unsafe { std::slice::from_raw_parts_mut(base.ptr().add(worker * per_worker), per_worker) };
        f(chunk, part)
    });
}

/// Splits `data` into consecutive chunks of `chunk_len` elements (the last may be shorter)
/// and runs `f(chunk_index, chunk)` for each, on `threads` threads of the team.
///
/// `chunk_len` must be a function of the kernel and the shape only, never of `threads`;
/// `f` must not take pool memory (use [`for_each_chunk_mut_scratch`]).
pub fn for_each_chunk_mut<T: Send>(threads: usize, data: &mut [T], chunk_len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    for_each_chunk_mut_scratch::<T, u8>(threads, data, chunk_len, &mut [], 0, |i, chunk, _| f(i, chunk));
}

/// The number of chunks of [`for_each_chunk_mut`] over `len` elements: `len / chunk_len`
/// rounded up (`chunk_len` 0 counts as 1). Size a [`for_each_chunk_mut_scratch`] with it.
pub fn chunk_count(len: usize, chunk_len: usize) -> usize {
    len.div_ceil(chunk_len.max(1))
}

/// As [`for_each_chunk_mut`], and `f(chunk_index, chunk, part)` also gets the running
/// thread's own part of `scratch`, as in [`for_each_chunk_scratch`] with
/// [`chunk_count`]`(data.len(), chunk_len)` chunks.
///
/// Panics if `scratch` holds fewer than `workers(threads, chunks) · per_worker` values.
pub fn for_each_chunk_mut_scratch<T: Send, S: Send>(
    threads: usize,
    data: &mut [T],
    chunk_len: usize,
    scratch: &mut [S],
    per_worker: usize,
    f: impl Fn(usize, &mut [T], &mut [S]) + Sync + Send,
) {
    let chunk_len = chunk_len.max(1);
    let len = data.len();
    let chunks = chunk_count(len, chunk_len);
    if workers(threads, chunks) <= 1 {
        check_scratch(scratch, 1, per_worker);
        let part = &mut scratch[..per_worker];
        data.chunks_mut(chunk_len).enumerate().for_each(|(i, c)| f(i, c, part));
        return;
    }
    let base = Base(data.as_mut_ptr());
    let base = &base;
    for_each_chunk_scratch(threads, chunks, scratch, per_worker, |i, part| {
        let start = i * chunk_len;
        let end = (start + chunk_len).min(len);
        // SAFETY: `for_each_chunk` runs each index exactly once, so the ranges
        // `start..end` are disjoint, in bounds of `data`, and `data` is borrowed mutably
        // for the whole call.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.ptr().add(start), end - start) };
        f(i, chunk, part)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn chunks_of_a_slice_are_visited_once_each_on_at_most_the_thread_count() {
        for threads in [1, 2, 3] {
            let mut data = vec![0u32; 1000];
            let names = Mutex::new(HashSet::new());
            let calls = AtomicUsize::new(0);
            for_each_chunk_mut(threads, &mut data, 64, |i, chunk| {
                calls.fetch_add(1, Ordering::Relaxed);
                assert_eq!(chunk.len(), if i == 15 { 1000 - 15 * 64 } else { 64 });
                for (j, v) in chunk.iter_mut().enumerate() {
                    *v += (i * 64 + j) as u32 + 1;
                }
                names.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
            assert_eq!(calls.load(Ordering::Relaxed), 16);
            assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1), "every element written exactly once");
            assert!(names.lock().unwrap().len() <= threads, "no more threads than asked for");
        }
    }

    #[test]
    fn a_parallel_call_inside_a_chunk_runs_on_its_own_thread() {
        let outer = AtomicUsize::new(0);
        for_each_chunk(2, 4, |_| {
            let me = std::thread::current().id();
            for_each_chunk(2, 8, |_| assert_eq!(std::thread::current().id(), me));
            outer.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(outer.load(Ordering::Relaxed), 4);
    }
}
