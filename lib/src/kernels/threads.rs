//! The kernels' thread pool: every run on one of its threads
//! ([`in_pool`]), the other threads kept awake from a run's start until
//! they have had no work for a while ([`KeepAwake`]), a kernel's tasks
//! handed to them through one shared slot ([`par_for`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Runs `f` on a thread of the executor's pool (the caller sleeps
/// meanwhile): a tool that runs a program many times does it all there,
/// so that a run need not hand each call
/// over.
pub fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(f),
        _ => f(),
    }
}

/// How long a kept-awake thread of the pool goes without work before it
/// gives up and sleeps as rayon's threads do ([`KeepAwake`]).
const AWAKE_IDLE: std::time::Duration = std::time::Duration::from_millis(5);

/// A spinner looks in rayon's queues once in this many of its rounds
/// (at [`par_for`]'s slot in every one): each look pins crossbeam's epoch
/// and tries the deques, and while it does the spinner joins a posted
/// region late. Once in 8 against every round (fresh processes
/// interleaved, two threads, 2026-11-29 afternoon): MobileNetV3 b1
/// 0.986x fast minutes and 0.987x slow ones, ResNet-50 b1 0.988x and
/// 0.990x, BERT b1 1.00x (at midday, MobileNetV3 1.005-1.009x fast and
/// 0.985x slow). Since the run-time kernels' last rayon iterators went to
/// [`par_for`] and [`par_chunks`] (Winograd's phases, the stem, the
/// pixel rows' images, the subsampled 1x1s, the row ops), only work from
/// outside a run comes this way.
const RAYON_LOOK_EVERY: u32 = 8;

/// The pool's threads spinning for work now (see [`KeepAwake`]).
static SPINNERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The pool's other threads kept awake from the start of a run: each runs
/// a job that takes the pool's pending work as soon as there is some
/// (`rayon::yield_now`) and otherwise spins, instead of going to sleep on a
/// futex between two parallel ops and being woken for the next. A small
/// model's ops are tens of microseconds, and rayon's sleep and wake-up
/// cost as much (MobileNetV3: 20% of samples in sched_yield and futex
/// calls). The spinners outlive the run until they have been idle for
/// [`AWAKE_IDLE`], as ONNX Runtime's intra-op threads spin after a
/// parallel section: a run that follows at once (a benchmark's, a
/// server's) finds them awake, where a spinner stopped at the end of each
/// run slept and had to be woken by the next, its first ops running on
/// one thread meanwhile. At most one spinner a thread other than the
/// runner. Off with `PT2KIT_NO_SPIN=1`.
/// While it lives, the thread that made it hands its kernels' tasks to
/// the spinners ([`par_for`]).
pub struct KeepAwake {
    runner: bool,
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        if self.runner {
            RUNNER.with(|r| r.set(r.get() - 1));
        }
    }
}

impl KeepAwake {
    pub fn start() -> KeepAwake {
        let (Some(runner), threads) = (rayon::current_thread_index(), rayon::current_num_threads())
        else {
            return KeepAwake { runner: false };
        };
        if threads < 2 || crate::knobs::is_set("PT2KIT_NO_SPIN") {
            return KeepAwake { runner: false };
        }
        RUNNER.with(|r| r.set(r.get() + 1));
        // (a spinner counts itself from before it is spawned until it
        // returns; this thread's own, where it took the run while it
        // spun, is not one for the run: without this, a run handed to the
        // pool from outside it found the other thread's spinner taking it
        // from rayon's queue and ran on that thread alone, seconds on end
        // in `par_for_runs_every_task_once`)
        let own = usize::from(SPINNING.with(|s| s.get()));
        while SPINNERS.load(Ordering::Acquire) < threads - 1 + own {
            SPINNERS.fetch_add(1, Ordering::AcqRel);
            rayon::spawn(move || {
                // the runner itself may take this job while it waits: it
                // must not spin on its own run
                if rayon::current_thread_index() != Some(runner) {
                    spin();
                }
                SPINNERS.fetch_sub(1, Ordering::AcqRel);
            });
        }
        KeepAwake { runner: true }
    }
}

/// A spinner's loop: the pool's work as it comes, until none has come for
/// [`AWAKE_IDLE`].
fn spin() {
    let was = SPINNING.with(|s| s.replace(true));
    spin_until_idle();
    SPINNING.with(|s| s.set(was));
}

/// [`spin`]'s loop.
fn spin_until_idle() {
    let mut idle_since = std::time::Instant::now();
    let mut spins = 0u32;
    let (me, threads) = (
        rayon::current_thread_index().unwrap_or(0),
        rayon::current_num_threads().max(1),
    );
    // (a loop posted before this spinner came is looked at once)
    let mut seen = 0;
    loop {
        // a kernel's tasks first (the runner waits on them), then, one
        // round in RAYON_LOOK_EVERY, rayon's
        let rayon_work = || {
            spins.is_multiple_of(RAYON_LOOK_EVERY)
                && matches!(rayon::yield_now(), Some(rayon::Yield::Executed))
        };
        if take_tasks(&mut seen, me, threads) || rayon_work() {
            spins = 0;
            idle_since = std::time::Instant::now();
            continue;
        }
        spins += 1;
        if spins.is_multiple_of(1024) && idle_since.elapsed() > AWAKE_IDLE {
            return;
        }
        std::hint::spin_loop();
    }
}

/// The executor's thread pool: rayon's global pool (`RAYON_NUM_THREADS`
/// threads, by default one per core), `None` if it cannot be had.
fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("pt2kit-exec-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

thread_local! {
    /// How many [`KeepAwake`]s this thread holds: it is a run's runner,
    /// whose [`par_for`]s the spinners share.
    static RUNNER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Whether this thread is a spinner ([`spin`]) now: a run it took
    /// from rayon's queues while it spun runs inside its spin, which
    /// counts in [`SPINNERS`] but spins for no one meanwhile.
    static SPINNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this thread is running a task of a [`par_for`]: a loop
    /// inside one runs on its thread.
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f(s, t)` for every task `t` in `0..tasks`, `s` made by `init` once
/// for each thread that takes part (as rayon's `for_each_init`), on the
/// executor's threads: where this thread runs a run with the spinners
/// awake ([`KeepAwake`]), the tasks are posted in one slot the spinners
/// watch ([`Shared`]), and the threads take them until none are left,
/// each its own part's first, then the others' from their backs
/// ([`Part`]: against one counter whose two ends the runner and the
/// spinner moved, MobileNetV3 b1 0.988x, ResNet-50 b1 and MobileNetV3 b8
/// 1.00x, fast minutes, 8 rounds each; the slot in static lines against
/// a job on the runner's stack, `handover_speed`'s region of 8 tasks of
/// 0.35 us 2.3-2.4 against 3.3-3.5 us on the VM's slow minutes, 1.57-1.62
/// against 1.65-1.70 in fast ones, MobileNetV3 b1 0.977x slow and 1.00x
/// fast, ResNet-50 b1 and BERT b1 1.00x slow); elsewhere
/// (and inside a task) through rayon, or on this thread. MobileNetV3 at
/// batch 1 runs some forty such regions a run (its convolutions'
/// products, depthwise tasks and grids): 0.964x of its time this way
/// (16 interleaved rounds, two threads, Zen 5), ResNet-18 and BERT at
/// batch 1 0.99x, the MLP at batch 8 1.00x; `handover_speed` times the
/// regions alone. A panic in a task is raised again here once every
/// task has ended.
pub(crate) fn par_for_init<S>(
    tasks: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) + Sync,
) {
    if tasks <= 1 || IN_TASK.with(|t| t.get()) {
        let mut s = init();
        (0..tasks).for_each(|t| f(&mut s, t));
        return;
    }
    let rayon = || {
        use rayon::prelude::*;
        (0..tasks)
            .into_par_iter()
            .for_each_init(&init, |s, t| f(s, t));
    };
    if RUNNER.with(|r| r.get()) == 0
        || SPINNERS.load(Ordering::Acquire) == 0
        || tasks > u32::MAX as usize / 2
    {
        return rayon();
    }
    let run = |claim: Claim| {
        let mut s = init();
        while let Some(t) = claim() {
            f(&mut s, t);
        }
    };
    // the slot is one run's at a time (another executor's run on another
    // of the pool's threads goes through rayon meanwhile)
    if shared().busy.0.swap(true, Ordering::Acquire) {
        return rayon();
    }
    let parts = rayon::current_num_threads().clamp(1, MAX_PARTS).min(tasks);
    // SAFETY: the body is called only by a thread that has claimed one of
    // this loop's tasks, and only until it counts them done; this function
    // returns once every task is done
    let body = unsafe { std::mem::transmute::<&Body<'_>, &'static Body<'static>>(&run) };
    for part in &shared().ends[..parts] {
        // SAFETY: read only by a thread that has claimed one of the tasks
        // posted with it (the last loop's are all done)
        unsafe { *part.0.job.get() = (body, parts) };
    }
    // (before any task of this loop can be done)
    let base = shared().done.0 .0.load(Ordering::Relaxed);
    // the job, the kernel's inputs and all before, seen by any thread that
    // claims one of its tasks (its acquire fence)
    std::sync::atomic::fence(Ordering::Release);
    for (p, part) in shared().ends[..parts].iter().enumerate() {
        // the runner's first task, task 0, taken here
        let (lo, hi) = (
            p * tasks / parts + usize::from(p == 0),
            (p + 1) * tasks / parts,
        );
        part.0
            .ends
            .store((hi as u64) << 32 | lo as u64, Ordering::Relaxed);
    }
    let me = rayon::current_thread_index().unwrap_or(0);
    let posts = shared().slot.0.load(Ordering::Relaxed) >> POSTS_SHIFT;
    shared().slot.0.store(
        (posts + 1) << POSTS_SHIFT | (me as u64 & 0xffff) << 8 | parts as u64,
        Ordering::Release,
    );
    let mine = work(0, 0, 0);
    while shared()
        .done
        .0
         .0
        .load(Ordering::Acquire)
        .wrapping_sub(base)
        + mine
        < tasks
    {
        std::hint::spin_loop();
    }
    let panic = if shared().done.0 .1.load(Ordering::Relaxed) {
        shared().done.0 .1.store(false, Ordering::Relaxed);
        PANIC.lock().ok().and_then(|mut p| p.take())
    } else {
        None
    };
    shared().busy.0.store(false, Ordering::Release);
    if let Some(panic) = panic {
        std::panic::resume_unwind(panic);
    }
}
/// [`par_for_init`] with no state of the threads'.
pub(crate) fn par_for(tasks: usize, f: impl Fn(usize) + Sync) {
    par_for_init(tasks, || (), |_, t| f(t))
}

/// The most tasks a [`par_chunks`] splits into a thread: its parts in runs
/// of neighbours beyond that (as rayon's adaptive split runs them), where
/// a task a part took a claim on the shared counter for each (a plane or
/// a row of a few hundred floats: the claims cost more than the parts).
const CHUNK_TASKS_PER_THREAD: usize = 8;

/// A buffer the tasks of a [`par_chunks_init`] share, each writing its own
/// parts.
struct Base<T>(*mut T);
// SAFETY: the tasks reach disjoint parts only (par_chunks_init)
unsafe impl<T: Send> Sync for Base<T> {}

/// `f(i, part)` for each part `i` of `out` (`chunk` elements each, the
/// last shorter), split between the threads as [`par_for`] splits its
/// tasks, neighbouring parts in one task where there are many
/// ([`CHUNK_TASKS_PER_THREAD`]): rayon's `par_chunks_mut().enumerate()`.
pub(crate) fn par_chunks<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    par_chunks_init(out, chunk, || (), |_, i, part| f(i, part))
}

/// [`par_chunks`] with a state `init` makes once for each thread that
/// takes part (rayon's `for_each_init`).
pub(crate) fn par_chunks_init<T: Send, S>(
    out: &mut [T],
    chunk: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize, &mut [T]) + Sync,
) {
    let (len, chunk) = (out.len(), chunk.max(1));
    let parts = len.div_ceil(chunk);
    let tasks = parts.min(CHUNK_TASKS_PER_THREAD * rayon::current_num_threads().max(1));
    let base = Base(out.as_mut_ptr());
    let base = &base;
    par_for_init(tasks, init, |s, t| {
        for i in t * parts / tasks..(t + 1) * parts / tasks {
            // SAFETY: part i, inside `out` and no other task's
            let part = unsafe {
                std::slice::from_raw_parts_mut(base.0.add(i * chunk), chunk.min(len - i * chunk))
            };
            f(s, i, part)
        }
    })
}

/// [`par_chunks`] over two buffers at once: part `i` of `a` (`ca`
/// elements) and of `b` (`cb`), as many parts in each.
pub(crate) fn par_chunks_pair<A: Send, B: Send>(
    (a, ca): (&mut [A], usize),
    (b, cb): (&mut [B], usize),
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let (ca, cb) = (ca.max(1), cb.max(1));
    let parts = a.len().div_ceil(ca).min(b.len().div_ceil(cb));
    let (blen, bb) = (b.len(), Base(b.as_mut_ptr()));
    let bb = &bb;
    let alen = (parts * ca).min(a.len());
    par_chunks(&mut a[..alen], ca, |i, pa| {
        // SAFETY: part i of b, inside it and no other task's
        let pb = unsafe { std::slice::from_raw_parts_mut(bb.0.add(i * cb), cb.min(blen - i * cb)) };
        f(i, pa, pb)
    })
}

/// Gives a thread the next task of a [`par_for_init`] to run, or none.
type Claim<'c> = &'c dyn Fn() -> Option<usize>;

/// A [`par_for_init`]'s body as its runner posts it: a thread's part, its
/// state made, then tasks as the claim gives them.
type Body<'a> = dyn Fn(Claim) + Sync + 'a;

/// The most parts a posted loop's tasks are split into (one a thread; the
/// spinners past it share the last ones).
const MAX_PARTS: usize = 8;

/// A value alone in its cache lines.
#[repr(align(128))]
struct Line<T>(T);

/// One part of the posted loop's tasks, alone in its cache lines: those
/// not taken yet, `[lo, hi)` as `hi << 32 | lo`, and the loop they are of.
///
/// The tasks lie in even parts in order, one a thread: the runner's the
/// first, each spinner's the next after the runner's (by the pool's
/// thread index). A thread takes its own part's from the front, then the
/// others' from their backs: each thread's tasks lie side by side (its
/// part of the output, which the next op's tasks read from its cache,
/// split as this one: tasks taken in turn from one counter, each
/// thread's outputs every other block, made MobileNetV3 at batch 1 1.03x
/// slower), and a thread's claims touch only its own part's line until it
/// is empty (one counter both ends of which every claim moved bounced its
/// line between the cores at each task: on the VM's slow minutes, 400 ns
/// a transfer, a region of 8 short tasks took longer on two threads than
/// on one). A spinner's first claim brings it the line with all it needs
/// to run the task.
struct Part {
    ends: AtomicU64,
    /// The posted loop's body and its parts, written by its runner before
    /// `ends`, read by a thread once it has claimed one of its tasks.
    job: std::cell::UnsafeCell<(&'static Body<'static>, usize)>,
}

// SAFETY: `job` is written only by the runner holding `Shared::busy` while no task
// of the loop before is left undone, and read only by one that has
// claimed a task posted after that write (par_for_init's fences)
unsafe impl Sync for Part {}

/// What the runner and the spinners share, each in its own cache lines
/// (one static, reached through [`shared`]: alone, the optimiser kept
/// only the word of a line-aligned static and put the next static in the
/// rest of its line, where the runner's lock of a mutex each loop took
/// the line from the spinner watching the word, 1.2 us a loop on the
/// VM's slow minutes).
#[repr(C)]
struct Shared {
    /// What the spinners watch: the posts so far (from bit
    /// [`POSTS_SHIFT`]), the last one's runner (its pool index, bits
    /// 8..24) and parts (bits 0..8). A spinner that sees it change claims
    /// a task of its part ([`Part`]: a claim of a task is of the loop
    /// posted last whatever the spinner saw, as no loop is posted again
    /// until all the tasks of the last are done); the runner then waits
    /// on `done`. Two lines cross between the cores for a spinner to
    /// start (this one and its part's) and one for the runner to see it
    /// end (`done`), where one shared job on the runner's stack took some
    /// nine (its pointer, a count of its users to keep it alive, its
    /// parts, a count of the threads that joined, its done count, its
    /// pointer taken out and the users seen gone).
    slot: Line<AtomicU64>,
    /// Tasks the spinners have ended, over all loops (a runner waits for
    /// its loop's to reach the count it did not run itself), and whether
    /// one of them panicked (its panic in [`PANIC`]).
    done: Line<(AtomicUsize, std::sync::atomic::AtomicBool)>,
    /// Held by the runner whose loop is posted.
    busy: Line<std::sync::atomic::AtomicBool>,
    /// The parts of the posted loop.
    ends: [Line<Part>; MAX_PARTS],
}

static SHARED: Shared = Shared {
    slot: Line(AtomicU64::new(0)),
    done: Line((
        AtomicUsize::new(0),
        std::sync::atomic::AtomicBool::new(false),
    )),
    busy: Line(std::sync::atomic::AtomicBool::new(false)),
    ends: [const {
        Line(Part {
            ends: AtomicU64::new(0),
            job: std::cell::UnsafeCell::new((&no_body, 1)),
        })
    }; MAX_PARTS],
};

/// [`SHARED`], whole (its address opaque to the optimiser).
#[inline(always)]
fn shared() -> &'static Shared {
    std::hint::black_box(&SHARED)
}

/// The body of the parts before any loop is posted (never called: their
/// tasks are none).
fn no_body(_: Claim) {}

/// Where the posts' count starts in [`Shared::slot`].
const POSTS_SHIFT: u32 = 24;

/// A task's panic, kept for its runner.
static PANIC: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>> = std::sync::Mutex::new(None);

/// The front task of part `p`, if it has one left (a fetch-add: on an
/// empty part `lo` passes `hi` and the part stays empty).
fn claim_front(p: usize) -> Option<usize> {
    let ends = shared().ends[p].0.ends.fetch_add(1, Ordering::Relaxed);
    let (lo, hi) = (ends & 0xffff_ffff, ends >> 32);
    (lo < hi).then_some(lo as usize)
}

/// The back task of part `p`, if it has one left.
fn claim_back(p: usize) -> Option<usize> {
    let word = &shared().ends[p].0.ends;
    let mut ends = word.load(Ordering::Relaxed);
    loop {
        let (lo, hi) = (ends & 0xffff_ffff, ends >> 32);
        if lo >= hi {
            return None;
        }
        match word.compare_exchange_weak(
            ends,
            ends - (1 << 32),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Some(hi as usize - 1),
            Err(now) => ends = now,
        }
    }
}

/// This thread's part of the posted loop, with task `first` of part
/// `part` claimed: its own part's (`home`) tasks, then the others' left;
/// the tasks it ran or dropped (a panic caught and kept, the tasks left
/// not run and counted done, so that the runner stops waiting).
fn work(home: usize, part: usize, first: usize) -> usize {
    // SAFETY: this thread has claimed a task of the loop posted with it
    let (body, parts) = unsafe { *shared().ends[part].0.job.get() };
    let home = home % parts;
    // (`first` counted from the start: a panic in the state's making,
    // before the body's first claim, drops it)
    let taken = std::cell::Cell::new(1usize);
    let (first, home_left) = (
        std::cell::Cell::new(Some(first)),
        std::cell::Cell::new(true),
    );
    let claim = || {
        if let Some(t) = first.take() {
            return Some(t);
        }
        let t = home_left
            .get()
            .then(|| claim_front(home))
            .flatten()
            .or_else(|| {
                home_left.set(false);
                (1..parts).find_map(|d| claim_back((home + d) % parts))
            });
        if t.is_some() {
            taken.set(taken.get() + 1);
        }
        t
    };
    IN_TASK.with(|t| t.set(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&claim)));
    IN_TASK.with(|t| t.set(false));
    if let Err(panic) = outcome {
        if let Ok(mut slot) = PANIC.lock() {
            slot.get_or_insert(panic);
        }
        shared().done.0 .1.store(true, Ordering::Relaxed);
        for e in &shared().ends[..parts] {
            let ends = e.0.ends.swap(0, Ordering::Relaxed);
            taken.set(taken.get() + ((ends >> 32).saturating_sub(ends & 0xffff_ffff)) as usize);
        }
    }
    taken.get()
}

/// A spinner's part of the loop posted last, if it is one this thread has
/// not `seen` and has a task left: whether it took part.
fn take_tasks(seen: &mut u64, me: usize, threads: usize) -> bool {
    let state = shared().slot.0.load(Ordering::Relaxed);
    if state == *seen {
        return false;
    }
    *seen = state;
    let (parts, runner) = ((state & 0xff) as usize, (state >> 8 & 0xffff) as usize);
    if parts == 0 {
        return false;
    }
    let home = (me + threads - runner % threads) % threads % parts;
    let claimed = claim_front(home).map(|t| (home, t)).or_else(|| {
        (1..parts).find_map(|d| claim_back((home + d) % parts).map(|t| ((home + d) % parts, t)))
    });
    let Some((part, first)) = claimed else {
        return false;
    };
    // the loop's job and inputs, as its runner posted them
    std::sync::atomic::fence(Ordering::Acquire);
    let taken = work(home, part, first);
    shared().done.0 .0.fetch_add(taken, Ordering::Release);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` on a thread of the pool as a run's runner, the spinners awake.
    fn as_runner<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        in_pool(|| {
            let _awake = KeepAwake::start();
            f()
        })
    }

    /// Every task runs once, on the runner and the spinners alike (in
    /// rounds, so that some find the spinners awake; with two threads or
    /// more, some of a run's tasks on another thread), from within a run
    /// and outside one, a loop inside a task included; each thread's state
    /// made once for all the tasks it takes.
    #[test]
    fn par_for_runs_every_task_once() {
        let shared = AtomicUsize::new(0);
        for tasks in [0, 1, 2, 3, 8, 17, 100] {
            for round in 0..20 {
                let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                let inits = AtomicUsize::new(0);
                let body = || {
                    let me = rayon::current_thread_index();
                    par_for_init(
                        tasks,
                        || inits.fetch_add(1, Ordering::Relaxed),
                        |_, t| {
                            runs[t].fetch_add(1, Ordering::Relaxed);
                            if tasks >= 17 && round % 2 == 0 {
                                // long enough for a spinner to come by
                                let start = std::time::Instant::now();
                                while start.elapsed() < std::time::Duration::from_micros(20) {
                                    std::hint::spin_loop();
                                }
                                if rayon::current_thread_index() != me {
                                    shared.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            // a loop inside a task: on this thread
                            let inner = AtomicUsize::new(0);
                            par_for(3, |_| {
                                inner.fetch_add(1, Ordering::Relaxed);
                            });
                            assert_eq!(inner.load(Ordering::Relaxed), 3);
                        },
                    )
                };
                if round % 2 == 0 {
                    as_runner(body);
                } else {
                    body();
                }
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                    "{tasks} tasks, round {round}"
                );
                assert!(
                    inits.load(Ordering::Relaxed) <= tasks.max(1),
                    "{tasks} tasks: a state a task at most"
                );
            }
        }
        if in_pool(rayon::current_num_threads) >= 2 {
            // (the other tests of this binary run meanwhile on the same
            // two CPUs, and the spinner's thread may wait for the OS longer
            // than the rounds above take: regions until one of its tasks
            // runs on another thread, up to a few seconds)
            let start = std::time::Instant::now();
            while shared.load(Ordering::Relaxed) == 0
                && start.elapsed() < std::time::Duration::from_secs(5)
            {
                as_runner(|| {
                    let me = rayon::current_thread_index();
                    par_for(64, |_| {
                        let start = std::time::Instant::now();
                        while start.elapsed() < std::time::Duration::from_micros(50) {
                            std::hint::spin_loop();
                        }
                        if rayon::current_thread_index() != me {
                            shared.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                });
            }
            assert!(
                shared.load(Ordering::Relaxed) > 0,
                "no task on a thread other than the runner's"
            );
        }
    }

    /// The hand-over's cost: a parallel region of `TASKS` (8) tasks of
    /// `WORK` (2000) steps of a dependent multiply-add each, through
    /// [`par_for`] within a run, through rayon's `into_par_iter`, and on
    /// one thread; microseconds a region, then the runner's share of the
    /// tasks (a timing, not a test: `cargo test --release -p pt2kit
    /// --features exec --lib handover_speed -- --ignored --nocapture`, on
    /// a quiet machine).
    #[test]
    #[ignore]
    fn handover_speed() {
        use rayon::prelude::*;
        let var = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let (tasks, work) = (var("TASKS", 8), var("WORK", 2000));
        let task = |t: usize| {
            let mut x = t;
            for i in 0..work {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            // (not a shared counter: its line crossed between the cores at
            // every task, 400 ns on the VM's slow minutes)
            std::hint::black_box(x);
        };
        let regions = 5_000;
        let per_region = |f: &dyn Fn()| {
            let start = std::time::Instant::now();
            (0..regions).for_each(|_| f());
            start.elapsed().as_secs_f64() / regions as f64 * 1e6
        };
        as_runner(|| {
            for round in 0..3 {
                // (the spinners kept awake for each loop of regions, as a
                // run starts them: they sleep after the single-threaded
                // loop, and a par_for finding none goes through rayon)
                let ours = {
                    let _awake = KeepAwake::start();
                    per_region(&|| par_for(tasks, task))
                };
                let theirs = per_region(&|| (0..tasks).into_par_iter().for_each(task));
                let alone = per_region(&|| (0..tasks).for_each(task));
                let me = rayon::current_thread_index();
                let mine = AtomicUsize::new(0);
                let _awake = KeepAwake::start();
                let _ = per_region(&|| {
                    par_for(tasks, |t| {
                        task(t);
                        if rayon::current_thread_index() == me {
                            mine.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                });
                eprintln!(
                    "round {round}: the runner's share of the tasks {:.3}",
                    mine.load(Ordering::Relaxed) as f64 / (regions * tasks) as f64
                );
                eprintln!(
                    "round {round}: {tasks} tasks of {work} steps: par_for {ours:.2} us a region, rayon {theirs:.2}, one thread {alone:.2}"
                );
            }
        });
    }

    /// A panic in a task reaches the caller once every task has ended (the
    /// others ran or were dropped, none runs after), and the pool's next
    /// loop runs whole.
    #[test]
    fn par_for_raises_a_task_panic_after_the_others() {
        let ran = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            as_runner(|| {
                par_for(16, |t| {
                    if t == 5 {
                        panic!("task 5");
                    }
                    ran.fetch_add(1, Ordering::Relaxed);
                })
            })
        }));
        let message = caught
            .expect_err("the task's panic")
            .downcast::<&str>()
            .map(|m| *m);
        assert_eq!(message.ok(), Some("task 5"));
        let after = ran.load(Ordering::Relaxed);
        assert!(after <= 15);
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert_eq!(
            ran.load(Ordering::Relaxed),
            after,
            "a task ran after the loop returned"
        );
        // a panic in a thread's state, before its first task: every
        // thread's claimed task counted (none waits for it)
        let caught = std::panic::catch_unwind(|| {
            as_runner(|| par_for_init(16, || panic!("a state"), |_: &mut (), _| {}))
        });
        assert!(caught.is_err());
        let next = AtomicUsize::new(0);
        as_runner(|| {
            par_for(16, |_| {
                next.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(next.load(Ordering::Relaxed), 16);
    }
}
