//! Running a kernel's chunks on several threads: [`for_each_chunk`] (the calling thread
//! takes part, helpers join through a shared chunk counter) and [`for_each_chunk_mut`]
//! (disjoint mutable chunks of one slice, on top of it). Both use the one thread team of
//! the process, so there are never more runnable threads than the thread setting; a call
//! made from inside a chunk (or while another caller owns the team) runs on its own thread.
//! Chunks are always a function of the kernel and the shape; threads only decide who runs
//! which. This is the one place outside the arithmetic kernels that needs `unsafe` (a
//! job's lifetime is erased while helpers run it; see `Team::run`).

use std::sync::{Mutex, OnceLock};

/// Runs `f(chunk)` for every chunk in `0..chunks`, on `threads` threads.
///
/// The chunks must be a function of the kernel and the shape only; which thread runs a
/// chunk is not specified, so `f` must write disjoint outputs per chunk.
///
/// The calling thread takes part: it posts the job to `threads - 1` helper threads and
/// claims chunks itself from a shared counter, as do the helpers once they wake up. The
/// caller then waits only for helpers still inside a chunk, never for one to wake, so a
/// late helper costs nothing but its share. A warm call allocates nothing. If another
/// caller is using the helpers, this call runs all its chunks on the calling thread.
pub fn for_each_chunk(threads: usize, chunks: usize, f: impl Fn(usize) + Sync + Send) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let scope = crate::scope::Inherited::capture(); // helpers account to the caller's scope
    let work = || {
        let _adopted = scope.adopt();
        loop {
            let chunk = next.fetch_add(1, Ordering::Relaxed);
            if chunk >= chunks {
                break;
            }
            f(chunk);
        }
    };
    if threads <= 1 || chunks <= 1 {
        work();
        return;
    }
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

/// How long an idle helper polls for the next job before it sleeps.
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
        use std::sync::atomic::Ordering;
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

/// Splits `data` into consecutive chunks of `chunk_len` elements (the last may be shorter)
/// and runs `f(chunk_index, chunk)` for each, on `threads` threads of the team.
///
/// `chunk_len` must be a function of the kernel and the shape only, never of `threads`.
pub fn for_each_chunk_mut<T: Send>(threads: usize, data: &mut [T], chunk_len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let chunk_len = chunk_len.max(1);
    let len = data.len();
    if threads <= 1 || len <= chunk_len {
        data.chunks_mut(chunk_len).enumerate().for_each(|(i, c)| f(i, c));
        return;
    }
    /// The slice's base pointer, shared by the chunks (each touches only its own range).
    struct Base<T>(*mut T);
    // SAFETY: the chunks built from it are disjoint `&mut [T]` with `T: Send`, so handing
    // the pointer to other threads is as sound as handing them the chunks.
    unsafe impl<T: Send> Sync for Base<T> {}
    impl<T> Base<T> {
        /// The pointer itself (a method, so closures capture the whole `Sync` wrapper).
        fn ptr(&self) -> *mut T {
            self.0
        }
    }
    let base = Base(data.as_mut_ptr());
    let base = &base;
    for_each_chunk(threads, len.div_ceil(chunk_len), |i| {
        let start = i * chunk_len;
        let end = (start + chunk_len).min(len);
        // SAFETY: `for_each_chunk` runs each index exactly once, so the ranges
        // `start..end` are disjoint, in bounds of `data`, and `data` is borrowed mutably
        // for the whole call.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.ptr().add(start), end - start) };
        f(i, chunk)
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
