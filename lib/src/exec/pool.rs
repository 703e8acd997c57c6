//! The executor's thread pool: every run on one of its threads
//! ([`in_pool`]), the other threads kept awake from a run's start until
//! they have had no work for a while ([`KeepAwake`]).

/// Runs `f` on a thread of the executor's pool (the caller sleeps
/// meanwhile): a tool that runs a program many times does it all there,
/// so that [`Executor::run`](super::Executor::run) need not hand each run
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
pub(super) struct KeepAwake;

impl KeepAwake {
    pub(super) fn start() -> KeepAwake {
        use std::sync::atomic::Ordering;
        let (Some(runner), threads) = (rayon::current_thread_index(), rayon::current_num_threads())
        else {
            return KeepAwake;
        };
        if threads < 2 || std::env::var_os("PT2KIT_NO_SPIN").is_some() {
            return KeepAwake;
        }
        // (a spinner counts itself from before it is spawned until it
        // returns)
        while SPINNERS.load(Ordering::Acquire) < threads - 1 {
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
        KeepAwake
    }
}

/// A spinner's loop: the pool's work as it comes, until none has come for
/// [`AWAKE_IDLE`].
fn spin() {
    let mut idle_since = std::time::Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
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
