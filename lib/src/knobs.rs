//! The environment variables the toolkit reads, declared once with the
//! tools that read them and what they do: the man pages' ENVIRONMENT
//! sections are rendered from [`KNOBS`] (`bins/src/man.rs`), and
//! `lib/tests/layout.rs` holds every `PT2KIT_*` read in the code to this
//! module ([`is_set`], [`value`]) and every name to the table.

/// One variable: its name, the tools that read it (empty: the test suite
/// only), what it does.
pub struct Knob {
    pub name: &'static str,
    pub tools: &'static [&'static str],
    pub doc: &'static str,
}

const READERS: &[&str] = &["ir-decompose", "ir2onnx", "ir-run", "ir-bench", "ir-diff"];
const RUNNERS: &[&str] = &["ir-run", "ir-bench"];

/// Every variable, in the order the man pages list them.
pub const KNOBS: &[Knob] = &[
    Knob {
        name: "RAYON_NUM_THREADS",
        tools: RUNNERS,
        doc: "How many CPU threads the executor's kernels split their work over; by default the physical cores. ir-bench --threads sets it.",
    },
    Knob {
        name: "PT2KIT_SPOOL_BYTES",
        tools: READERS,
        doc: "Weights read from a pipe above this many bytes (default 256 MiB) go to an unlinked temporary file in TMPDIR, mapped, not into memory.",
    },
    Knob {
        name: "TMPDIR",
        tools: READERS,
        doc: "Where weights read from a pipe are spooled (see PT2KIT_SPOOL_BYTES).",
    },
    Knob {
        name: "CANDLE_NUM_THREADS",
        tools: RUNNERS,
        doc: "Threads of candle's own element-wise ops; 1 unless set (its spinning workers took cores from the executor's kernels).",
    },
    Knob {
        name: "PT2KIT_SEED",
        tools: RUNNERS,
        doc: "The seed (an unsigned integer, default 0) of the random ops a graph holds (rand, randn, randint and their _like forms), drawn by the toolkit's own generator: not torch's values.",
    },
    Knob {
        name: "PT2KIT_NO_FUSION",
        tools: RUNNERS,
        doc: "Set: every node runs by itself (no element-wise chain fused into one pass, none into a convolution or a matrix product, no scale folded into a convolution's weight), for timing a run both ways. The results are the same bits but where a scale was folded (see PT2KIT_NO_SCALE_FOLD).",
    },
    Knob {
        name: "PT2KIT_AS_GIVEN",
        tools: RUNNERS,
        doc: "Set: the CPU executor runs a program as given, not lowered at load the way ir-decompose lowers it (composites to core ATen, in-place ops made functional, its default passes), for timing a run both ways. Ops the executor has no row for are lowered either way. The results agree within the rounding of a batch norm folded into its convolution.",
    },
    Knob {
        name: "PT2KIT_NO_SCALE_FOLD",
        tools: RUNNERS,
        doc: "Set: a convolution whose input is scaled per channel at batch 1 (a squeeze-and-excitation's x * s) reads the product as it is made, not x with its weight's input channels scaled (which rounds differently, within 1e-6 relative).",
    },
    Knob {
        name: "PT2KIT_NO_EPILOGUE",
        tools: RUNNERS,
        doc: "Set: element-wise chains after a convolution or a linear layer's matrix product run as passes of their own, not inside its kernel. The results are the same bits.",
    },
    Knob {
        name: "PT2KIT_NO_IN_PLACE",
        tools: RUNNERS,
        doc: "Set: every kernel writes a fresh output, none over a dead residual (for timing a run both ways). The results are the same bits.",
    },
    Knob {
        name: "PT2KIT_PLANES_ONLY",
        tools: RUNNERS,
        doc: "Set: no output is left channels-last for the ops after it (for timing a run both ways). The results are the same bits.",
    },
    Knob {
        name: "PT2KIT_NO_WINOGRAD",
        tools: RUNNERS,
        doc: "Set: 3x3 convolutions take the direct kernels, not Winograd's (which rounds differently, within the float32 tolerance; PT2E int8's, on AVX2, gives the same bits).",
    },
    Knob {
        name: "PT2KIT_NO_SPIN",
        tools: RUNNERS,
        doc: "Set: the executor's threads sleep between parallel ops instead of spinning through a run.",
    },
    Knob {
        name: "PT2KIT_NO_AVX512",
        tools: RUNNERS,
        doc: "Set: the AVX2 + FMA kernels (or, without those, the baseline ones) even on a CPU with AVX-512F.",
    },
    Knob {
        name: "PT2KIT_NO_AVX2",
        tools: RUNNERS,
        doc: "Set: the baseline kernels (no AVX-512, no AVX2: the gemm crate and candle's loops), as on a CPU without either. Much slower; for testing.",
    },
    Knob {
        name: "PT2KIT_NO_AMX",
        tools: RUNNERS,
        doc: "Set: --precision bf16 computes its products with AVX512-BF16 even on a CPU with AMX-BF16 tiles (for timing and testing the two).",
    },
    Knob {
        name: "PT2KIT_INT8_REFERENCE",
        tools: RUNNERS,
        doc: "Set: a PT2E int8 graph runs as written (float32 products between its quantize and dequantize nodes), not with its quantized convolutions and linear layers fused into integer products on AVX512-VNNI or AVX2 (for timing and checking the two).",
    },
    Knob {
        name: "UPDATE_GOLDEN",
        tools: &[],
        doc: "Only for the test suite: rewrite golden files instead of comparing.",
    },
    Knob {
        name: "PT2KIT_TEST_HOLD",
        tools: &[],
        doc: "Only for the test suite: stop while writing an output (STAGE:FILE), to check what an interrupted write leaves.",
    },
];

/// Whether `name` is declared in [`KNOBS`].
pub fn declared(name: &str) -> bool {
    KNOBS.iter().any(|k| k.name == name)
}

/// Whether a flag variable is set (to anything).
pub fn is_set(name: &str) -> bool {
    debug_assert!(declared(name), "{name} is not in knobs::KNOBS");
    std::env::var_os(name).is_some()
}

/// A variable's value, when it is set.
pub fn value(name: &str) -> Option<std::ffi::OsString> {
    debug_assert!(declared(name), "{name} is not in knobs::KNOBS");
    std::env::var_os(name)
}
