//! The unit tests' allocator: the system's, counting what the current thread allocates while
//! it is measured, so a test can bound the memory (and the CPU time) of a piece of work
//! without a wall clock or a process-wide figure that other tests running beside it disturb.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    time::Duration,
};

#[global_allocator]
static METER: Meter = Meter;

struct Meter;

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    on: bool,
    live: i64,
    peak: i64,
    allocations: u64,
    /// Bytes allocated in all (a buffer grown counts its new size): what was written into
    /// fresh memory, copies included.
    allocated: u64,
}

thread_local! {
    // A `const` Cell of plain numbers: reading it never allocates, which the allocator relies on.
    static COUNTS: Cell<Counts> = const {
        Cell::new(Counts { on: false, live: 0, peak: 0, allocations: 0, allocated: 0 })
    };
}

fn record(bytes: i64, allocations: u64, allocated: usize) {
    let _ = COUNTS.try_with(|cell| {
        let mut counts = cell.get();
        if counts.on {
            counts.live += bytes;
            counts.peak = counts.peak.max(counts.live);
            counts.allocations += allocations;
            counts.allocated += allocated as u64;
            cell.set(counts);
        }
    });
}

// SAFETY: every call is passed to the system allocator unchanged; only counts are kept beside.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            record(layout.size() as i64, 1, layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            record(layout.size() as i64, 1, layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        record(-(layout.size() as i64), 0, 0);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            record(new_size as i64 - layout.size() as i64, 1, new_size);
        }
        moved
    }
}

/// What a piece of work cost the thread that ran it.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// The most bytes it had allocated and not yet freed at once.
    pub peak_bytes: u64,
    pub allocations: u64,
    /// Bytes allocated in all.
    pub allocated_bytes: u64,
    /// The thread's CPU time.
    pub cpu: Duration,
}

/// Runs `work` on this thread, measured.
pub fn measure<T>(work: impl FnOnce() -> T) -> (T, Measured) {
    COUNTS.with(|cell| {
        cell.set(Counts {
            on: true,
            ..Counts::default()
        })
    });
    let started = thread_cpu();
    let out = work();
    let cpu = thread_cpu().saturating_sub(started);
    let counts = COUNTS.with(|cell| cell.replace(Counts::default()));
    let measured = Measured {
        peak_bytes: counts.peak.max(0) as u64,
        allocations: counts.allocations,
        allocated_bytes: counts.allocated,
        cpu,
    };
    (out, measured)
}

/// The allocations `work` (a future) makes while it is polled, and its output; what other
/// tasks do on the thread between its polls is not counted.
pub async fn measure_polls<F: Future>(work: F) -> (F::Output, Measured) {
    let mut work = std::pin::pin!(work);
    let mut kept = Counts::default();
    let mut cpu = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        COUNTS.with(|cell| cell.set(Counts { on: true, ..kept }));
        let started = thread_cpu();
        let polled = work.as_mut().poll(cx);
        cpu += thread_cpu().saturating_sub(started);
        kept = COUNTS.with(|cell| cell.replace(Counts::default()));
        polled
    })
    .await;
    let measured = Measured {
        peak_bytes: kept.peak.max(0) as u64,
        allocations: kept.allocations,
        allocated_bytes: kept.allocated,
        cpu,
    };
    (out, measured)
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; the clock id is a constant Linux knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
