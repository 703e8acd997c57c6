//! How many threads the executor's pool has: settled from a tool's
//! `--threads` or `RAYON_NUM_THREADS` before any thread starts; the pool
//! itself is the kernels' (`kernels::threads`).

/// The most CPU threads a tool starts (`--threads`, `RAYON_NUM_THREADS`):
/// more than this is refused (exit 2) before any thread starts, where
/// rayon would try to start them all and panic when it cannot.
pub const MAX_THREADS: u64 = 1024;

/// Settles the number of CPU threads before any pool exists: `threads`
/// (a tool's `--threads`, which sets `RAYON_NUM_THREADS` for candle and
/// rayon), else `RAYON_NUM_THREADS` (a whole number, 0 for one per core,
/// at most [`MAX_THREADS`]), else one per core; then starts rayon's
/// global pool, so that a failure to start its threads is an error (exit
/// 2, naming the count), not rayon's panic. Call it first, before any
/// thread starts (it may set the environment variable).
pub fn start_threads(threads: Option<u64>) -> crate::Result<()> {
    use crate::Error;
    let (n, from) = match threads {
        Some(n) => {
            if !(1..=MAX_THREADS).contains(&n) {
                return Err(Error::usage(format!(
                    "--threads {n}: give 1 to {MAX_THREADS}"
                )));
            }
            // SAFETY (of the set): the caller starts no thread before this.
            std::env::set_var("RAYON_NUM_THREADS", n.to_string());
            (n as usize, format!("--threads {n}"))
        }
        None => match std::env::var_os("RAYON_NUM_THREADS") {
            None => (0, String::new()),
            Some(v) => {
                let text = v.to_string_lossy();
                match text.trim().parse::<u64>() {
                    Ok(n) if n <= MAX_THREADS => (n as usize, format!("RAYON_NUM_THREADS={n}")),
                    _ => {
                        return Err(Error::usage(format!(
                            "RAYON_NUM_THREADS={text:?}: give a whole number of threads from 1 to {MAX_THREADS} (0 or unset: one per core)"
                        )))
                    }
                }
            }
        },
    };
    match rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
    {
        Ok(()) => Ok(()),
        // Started before in this process (a second call; tests).
        Err(e) if e.to_string().contains("already been initialized") => Ok(()),
        Err(e) => {
            let count = if n == 0 {
                "a thread per core".to_string()
            } else {
                format!("{n} threads")
            };
            let from = if from.is_empty() {
                "RAYON_NUM_THREADS unset".to_string()
            } else {
                from
            };
            Err(Error::usage(format!(
                "{from}: cannot start {count} ({e}): give fewer with --threads or RAYON_NUM_THREADS"
            )))
        }
    }
}
