//! What the tools that execute a program (`ir-run`, `ir-bench`) share: the
//! input flags and how they become checked inputs (files, `-i NAME=FILE`,
//! or random tensors shaped like the example inputs), the device flag, and
//! the peak RSS reading. Each tool keeps only what it does with the runs.

use std::path::PathBuf;

use clap::ValueEnum;
use pt2kit::cli;
use pt2kit::contract::{self, GivenInput, Scalar};
use pt2kit::exec::DeviceKind;
use pt2kit::ir::{Dtype, Program};
use pt2kit::tensorfile::{self, HostTensor};
use pt2kit::{Error, Result};

/// The flags that say where the inputs come from.
#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Inputs by name, from an .npz or .safetensors file (keys arr_0, arr_1, ... give the inputs in order)
    #[arg(long, value_name = "FILE")]
    pub inputs: Option<PathBuf>,
    /// One input from an .npy file, or the value of an int, float or bool input (`-i n=5`) (repeatable; with --inputs, each name once)
    #[arg(short = 'i', long = "input", value_name = "NAME=FILE.npy|VALUE")]
    pub input_files: Vec<String>,
    /// Random inputs shaped like the example inputs recorded at export
    #[arg(long, conflicts_with_all = ["inputs", "input_files"])]
    pub random: bool,
    /// Seed for random inputs
    #[arg(long, default_value_t = 0, conflicts_with_all = ["inputs", "input_files"])]
    pub seed: u64,
}

/// The limits of a run (`--max-memory`, `--max-iterations`), how it
/// holds its weights and the precision its products compute in.
#[derive(clap::Args, Debug, Clone)]
pub struct MemoryArgs {
    /// The largest value a run may make: a program with a larger one is refused before it runs, and a run stops (exit 3) before it makes one whose size is known only at run time (dynamic dims, .item(), loop carries). Bytes, or with K, M, G, T (powers of 1024) [default: the memory available now: MemAvailable, less under a cgroup memory limit or an address-space limit (ulimit -v)]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// Stop a while_loop still running after N iterations (exit 3)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_ITERATIONS, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: u64,
    /// Leave large weights where they lie (the mapped IR file or archive) instead of copying them into memory, where matrix products and embeddings read them in place: auto maps each weight of 1 MiB or more that only views, products and embeddings read
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = MapWeightsArg::Auto)]
    pub map_weights: MapWeightsArg,
    /// The precision of the float32 matrix products (linear, matmul, addmm, and bmm or matmul of two activations, attention's) and convolutions of one group: bf16 rounds both operands to bfloat16 (to nearest even, as torch) and sums the products in float32, on AMX-BF16 or AVX512-BF16 (float32 on a CPU with neither, said at -v); everything else runs in float32
    #[arg(long, value_enum, value_name = "P", default_value_t = PrecisionArg::F32)]
    pub precision: PrecisionArg,
}

/// `--precision`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrecisionArg {
    F32,
    Bf16,
}

/// `--map-weights`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum MapWeightsArg {
    Auto,
    Always,
    Never,
}

/// `--max-iterations` unless given.
pub const DEFAULT_MAX_ITERATIONS: u64 = 1_000_000;

impl MemoryArgs {
    /// The memory budget: `--max-memory`, else the memory available now.
    pub fn budget(&self) -> Option<u64> {
        self.max_memory
            .or_else(pt2kit::exec::budget::available_memory)
    }

    /// The executor's options these flags ask for.
    pub fn exec_options(&self) -> pt2kit::exec::ExecOptions {
        use pt2kit::exec::mapped::MapWeights;
        pt2kit::exec::ExecOptions {
            max_memory: self.budget(),
            max_iterations: Some(self.max_iterations),
            map_weights: match self.map_weights {
                MapWeightsArg::Auto => MapWeights::Auto,
                MapWeightsArg::Always => MapWeights::Always,
                MapWeightsArg::Never => MapWeights::Never,
            },
            precision: match self.precision {
                PrecisionArg::F32 => pt2kit::exec::Precision::F32,
                PrecisionArg::Bf16 => pt2kit::exec::Precision::Bf16,
            },
            ..Default::default()
        }
    }
}

/// `512M`, `8G`, `1.5GiB`, `4096`.
fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().trim_end_matches(['B', 'b']).trim_end_matches('i');
    let (num, scale) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        Some('T' | 't') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok((v * scale as f64) as u64),
        _ => Err(format!(
            "{s:?} is not a size (bytes, or a number with K, M, G or T)"
        )),
    }
}

/// Reads the program a run executes and checks it against the shape rules
/// and the limits, the memory cap included.
pub fn read_program(path: Option<&std::path::Path>, memory: &MemoryArgs) -> Result<Program> {
    let program = cli::read_ir_unchecked(path)?;
    let limits = pt2kit::infer::Limits {
        max_bytes: memory.budget(),
        ..Default::default()
    };
    pt2kit::infer::check(&program, &limits).map_err(|e| e.at(cli::input_name(path)))?;
    Ok(program)
}

/// Where to run (`--device`).
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DeviceArg {
    Cpu,
    Cuda,
}

impl DeviceArg {
    pub fn kind(self) -> DeviceKind {
        match self {
            DeviceArg::Cpu => DeviceKind::Cpu,
            DeviceArg::Cuda => DeviceKind::Cuda,
        }
    }

    /// The name as given on the command line (`cpu`, `cuda`).
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// The inputs the flags name, checked against the exported shape contract.
/// With no input flag at all, `random_by_default` decides between random
/// inputs and a usage error that lists the model's inputs.
pub fn checked_inputs(
    program: &Program,
    args: &InputArgs,
    random_by_default: bool,
) -> Result<Vec<(String, HostTensor)>> {
    Ok(checked_inputs_with(program, args, random_by_default, Vec::new())?.0)
}

/// Named user inputs, in the order given.
pub type Inputs = Vec<(String, HostTensor)>;

/// As [`checked_inputs`], with more inputs from elsewhere (`ir-run
/// --state`: the user inputs a program updates, carried from the last
/// call), each used where the input files do not give that name; the
/// names given both ways are returned beside the inputs, for the caller
/// to judge once it knows the program's state.
pub fn checked_inputs_with(
    program: &Program,
    args: &InputArgs,
    random_by_default: bool,
    carried: Vec<(String, HostTensor)>,
) -> Result<(Inputs, Vec<String>)> {
    let mut both = Vec::new();
    let no_files = args.inputs.is_none() && args.input_files.is_empty();
    let inputs = if args.random || (random_by_default && no_files) {
        random_inputs(program, args.seed)?
    } else {
        let mut inputs = file_inputs(program, args)?;
        for (name, t) in carried {
            if inputs.iter().any(|(n, _)| *n == name) {
                both.push(name);
            } else {
                inputs.push((name, t));
            }
        }
        let user = contract::user_inputs(program);
        if inputs.is_empty() && !user.is_empty() {
            let names: Vec<&str> = user.iter().map(|(_, n)| n.as_str()).collect();
            return Err(Error::usage(format!(
                "no inputs given: the model takes {} (use --inputs FILE.npz, -i NAME=FILE.npy or --random)",
                names.join(", ")
            )));
        }
        inputs
    };
    let given: Vec<GivenInput> = inputs
        .iter()
        .map(|(name, t)| GivenInput {
            name,
            dtype: t.dtype,
            shape: &t.shape,
            scalar: Scalar::of(t),
        })
        .collect();
    contract::check_inputs(program, &given)?;
    Ok((inputs, both))
}

/// The inputs of `--inputs FILE` and `-i NAME=FILE`. Both may be given;
/// a name given twice (in both, or twice with `-i`) is a usage error. A
/// file whose keys are `arr_0`, `arr_1`, ... (`np.savez(f, x, y)`) and
/// name no input gives the model's inputs in order (`-v` says so).
fn file_inputs(program: &Program, args: &InputArgs) -> Result<Vec<(String, HostTensor)>> {
    let mut inputs: Vec<(String, HostTensor)> = Vec::new();
    let mut from: Vec<String> = Vec::new();
    if let Some(path) = &args.inputs {
        let mut tensors = tensorfile::read_tensors(path, "x")?;
        let user: Vec<String> = contract::user_inputs(program)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let positional = !tensors.is_empty()
            && tensors
                .iter()
                .enumerate()
                .all(|(i, (k, _))| *k == format!("arr_{i}"))
            && !tensors.iter().any(|(k, _)| user.contains(k));
        if positional {
            if tensors.len() != user.len() {
                return Err(Error::usage(format!(
                    "{}: {} positional arrays (arr_0...), but the model takes {} inputs: {}",
                    path.display(),
                    tensors.len(),
                    user.len(),
                    user.join(", ")
                )));
            }
            for ((key, _), name) in tensors.iter_mut().zip(&user) {
                cli::verbose(format!("input {name} is {key} of {}", path.display()));
                *key = name.clone();
            }
        }
        for (name, t) in tensors {
            from.push(format!("--inputs {}", path.display()));
            inputs.push((name, t));
        }
    }
    for spec in &args.input_files {
        let (name, file) = spec.split_once('=').ok_or_else(|| {
            Error::usage(format!("-i {spec}: expected NAME=FILE.npy or NAME=VALUE"))
        })?;
        // a literal value (`-i n=5`) for an int, float or bool input,
        // unless a file of that name exists
        if let (Some(value), false) = (Scalar::parse(file), std::path::Path::new(file).exists()) {
            from.push(format!("-i {spec}"));
            inputs.push((name.to_string(), value.to_host()));
            continue;
        }
        let t = tensorfile::read_tensors(std::path::Path::new(file), name)?;
        if t.len() != 1 {
            return Err(Error::usage(format!(
                "-i {spec}: {file} holds {} arrays; -i takes one (an .npy)",
                t.len()
            )));
        }
        for (_, t) in t {
            from.push(format!("-i {spec}"));
            inputs.push((name.to_string(), t));
        }
    }
    for (i, (name, _)) in inputs.iter().enumerate() {
        if let Some(j) = inputs[..i].iter().position(|(n, _)| n == name) {
            return Err(Error::usage(format!(
                "input {name} is given twice: by {} and by {}",
                from[j], from[i]
            )));
        }
    }
    Ok(inputs)
}

fn random_inputs(program: &Program, seed: u64) -> Result<Vec<(String, HostTensor)>> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    contract::user_inputs(program)
        .into_iter()
        .map(|(pos, name)| {
            if let Some(value) = contract::example_scalar(program, pos) {
                return Ok((name, value.to_host()));
            }
            let (dtype, shape) = contract::example_shape(program, pos).ok_or_else(|| {
                Error::unsupported(format!(
                    "input {name}: no example shape recorded, give inputs"
                ))
            })?;
            let t = random_tensor(dtype, shape, &mut state);
            Ok((name, t))
        })
        .collect()
}

/// Deterministic inputs for --random, of each input's declared dtype
/// (xorshift; floats in [0, 1), complex numbers with both parts so, ints
/// in [0, 2) so they are valid indices, bools half true).
fn random_tensor(dtype: Dtype, shape: Vec<usize>, state: &mut u64) -> HostTensor {
    let n: usize = shape.iter().product();
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let count = if dtype.is_complex() { 2 * n } else { n };
    let floats: Vec<f64> = (0..count)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    let each =
        |f: &dyn Fn(f64) -> Vec<u8>| -> Vec<u8> { floats.iter().flat_map(|v| f(*v)).collect() };
    let int = |v: f64| (v * 2.0) as i64;
    let data: Vec<u8> = match dtype {
        Dtype::Float32 | Dtype::Complex64 => each(&|v| (v as f32).to_le_bytes().to_vec()),
        Dtype::Float64 | Dtype::Complex128 => each(&|v| v.to_le_bytes().to_vec()),
        Dtype::Float16 => each(&|v| half::f16::from_f64(v).to_le_bytes().to_vec()),
        Dtype::BFloat16 => each(&|v| half::bf16::from_f64(v).to_le_bytes().to_vec()),
        Dtype::Int64 | Dtype::Uint64 => each(&|v| int(v).to_le_bytes().to_vec()),
        Dtype::Int32 | Dtype::Uint32 => each(&|v| (int(v) as i32).to_le_bytes().to_vec()),
        Dtype::Int16 | Dtype::Uint16 => each(&|v| (int(v) as i16).to_le_bytes().to_vec()),
        Dtype::Int8 => each(&|v| vec![int(v) as u8]),
        Dtype::Bool | Dtype::Uint8 => each(&|v| vec![(v >= 0.5) as u8]),
        _ => each(&|v| (v as f32).to_le_bytes().to_vec()),
    };
    let dtype = if data.len() == n * dtype.size() {
        dtype
    } else {
        // (a dtype no tensor file holds: float32, which the contract names)
        Dtype::Float32
    };
    HostTensor { dtype, shape, data }
}

/// The process's peak resident memory (`VmHWM`), where /proc has it.
/// A field of /proc/self/status in bytes (`VmHWM`, `RssAnon`, ...).
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The peak of the process's anonymous memory (RssAnon: memory not backed
/// by a file, where the page cache holds mapped weights), which the kernel
/// does not track: a thread samples it every 10 ms (and each read of the
/// peak once more) from when
/// [`AnonPeak::start`] is called.
pub struct AnonPeak {
    peak: std::sync::Arc<std::sync::atomic::AtomicU64>,
    available: bool,
}

impl AnonPeak {
    pub fn start() -> AnonPeak {
        use std::sync::atomic::Ordering;
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let available = status_bytes("RssAnon:").is_some();
        if available {
            let p = peak.clone();
            std::thread::Builder::new()
                .name("rss-anon".into())
                .spawn(move || loop {
                    if let Some(v) = status_bytes("RssAnon:") {
                        p.fetch_max(v, Ordering::Relaxed);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                })
                .ok();
        }
        AnonPeak { peak, available }
    }

    /// The highest RssAnon seen so far (sampled once more now).
    pub fn peak(&self) -> Option<u64> {
        use std::sync::atomic::Ordering;
        if !self.available {
            return None;
        }
        if let Some(v) = status_bytes("RssAnon:") {
            self.peak.fetch_max(v, Ordering::Relaxed);
        }
        Some(self.peak.load(Ordering::Relaxed))
    }
}

pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}
