//! Fixed cost of a parallel section on the thread team (`kernels::parallel`), a
//! measurement, not a test: an empty two-chunk section, and a two-chunk section of equal
//! busy work, at 2 threads; prints the median and the minimum per call over batches, how
//! often the calling thread ran both chunks (the helper joined too late), and the timeline
//! of undisturbed single calls (both threads took a chunk, neither was preempted): when
//! each chunk starts and ends and when the call returns, medians in µs. On a shared
//! machine the batch figures measure the scheduler; the timeline's join delay (chunk 1's
//! start) and finish delay (return after the last chunk's end) are the hand-over's own
//! cost. Run: `cargo run --release -p om-core --example handover [WORK_ITERS]`.

use om_core::kernels::parallel::for_each_chunk;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// A busy loop of `iters` dependent steps (a fixed instruction count).
fn busy(iters: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..iters {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

fn main() {
    let iters: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let report = |name: &str, per_call: &mut Vec<f64>| {
        per_call.sort_by(f64::total_cmp);
        println!("{name}: median {:.2} us, min {:.2} us per call", per_call[per_call.len() / 2], per_call[0]);
    };
    // One chunk's busy work alone, on this thread.
    let mut solo = Vec::new();
    for _ in 0..31 {
        let t = Instant::now();
        for _ in 0..100 {
            black_box(busy(iters));
        }
        solo.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
    }
    report(&format!("one chunk of {iters} steps, 1 thread"), &mut solo);
    let solo_median = solo[solo.len() / 2];
    for (name, work) in [("empty 2-chunk section, 2 threads", 0), ("2 chunks of busy work, 2 threads", iters)] {
        let mut per_call = Vec::new();
        let both = AtomicUsize::new(0);
        let calls = 1000;
        for _ in 0..31 {
            let t = Instant::now();
            for _ in 0..calls {
                let me = std::thread::current().id();
                let mine = AtomicUsize::new(0);
                for_each_chunk(2, 2, |_| {
                    black_box(busy(work));
                    if std::thread::current().id() == me {
                        mine.fetch_add(1, Ordering::Relaxed);
                    }
                });
                if mine.load(Ordering::Relaxed) == 2 {
                    both.fetch_add(1, Ordering::Relaxed);
                }
            }
            per_call.push(t.elapsed().as_secs_f64() * 1e6 / calls as f64);
        }
        report(name, &mut per_call);
        println!("  caller ran both chunks in {} of {} calls", both.load(Ordering::Relaxed), 31 * calls);
    }
    // Timeline of single calls: when each chunk starts and ends after the call begins, and
    // when the call returns (µs, medians over calls where the helper took a chunk).
    let (mut starts, mut ends, mut rets) = (vec![vec![]; 2], vec![vec![]; 2], vec![]);
    for _ in 0..20000 {
        let t0 = Instant::now();
        let me = std::thread::current().id();
        let marks = std::sync::Mutex::new([(0.0, 0.0, false); 2]);
        for_each_chunk(2, 2, |c| {
            let s = t0.elapsed().as_secs_f64() * 1e6;
            black_box(busy(iters));
            let e = t0.elapsed().as_secs_f64() * 1e6;
            marks.lock().unwrap()[c] = (s, e, std::thread::current().id() == me);
        });
        let r = t0.elapsed().as_secs_f64() * 1e6;
        let m = marks.into_inner().unwrap();
        // Only calls that no preemption disturbed: both threads took a chunk, the second
        // chunk started within 5 µs, and neither chunk ran 10% longer than alone.
        let clean = m.iter().all(|&(s, e, _)| e - s < 1.1 * solo_median) && m[1].0.max(m[0].0) < 5.0;
        if m[0].2 != m[1].2 && clean {
            for (i, &(s, e, _)) in m.iter().enumerate() {
                starts[i].push(s);
                ends[i].push(e);
            }
            rets.push(r);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    println!(
        "timeline ({} undisturbed calls with both threads): chunk 0 {:.2}..{:.2}, chunk 1 {:.2}..{:.2}, return {:.2} us",
        rets.len(),
        med(&mut starts[0]),
        med(&mut ends[0]),
        med(&mut starts[1]),
        med(&mut ends[1]),
        med(&mut rets)
    );
}
