//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the executor rows.

use crate::ir::op::aten;
use super::*;

fn fill_value(ctx: &Ctx) -> Result<(Num, Dtype)> {
    Ok(match ctx.value("fill_value")? {
        Value::Tensor(t) => {
            let e = elems(&t)?;
            if e.len() == 0 {
                return Err(Error::bad_input("fill value: an empty tensor"));
            }
            (e.get(0), t.dtype)
        }
        v => match Num::of(&v) {
            Some(n) => (n, n.dtype()),
            None => return Err(Error::bad_input(format!("fill value {v:?}"))),
        },
    })
}

fn creation(ctx: &mut Ctx) -> OpResult {
    let name = ctx.node.target.name.clone();
    let like = name.ends_with("_like");
    let (shape, base_dtype) = if like {
        let x = ctx.tensor("self")?;
        (x.dims().to_vec(), x.dtype)
    } else if name.starts_with("new_") {
        let x = ctx.tensor("self")?;
        (sizes_of(&ctx.ints("size")?)?, x.dtype)
    } else {
        (sizes_of(&ctx.ints("size")?)?, Dtype::Float32)
    };
    let (value, value_dtype) = match name.trim_end_matches("_like").trim_start_matches("new_") {
        "zeros" => (Num::Int(0), base_dtype),
        "ones" => (Num::Int(1), base_dtype),
        "full" | "new_full" => {
            let (v, d) = fill_value(ctx)?;
            (v, if like { base_dtype } else { d })
        }
        "empty" | "new_empty" => (Num::Int(0), base_dtype),
        other => return Err(unsupported(other.to_string())),
    };
    let dtype = ctx
        .dtype("dtype")
        .unwrap_or(if like { base_dtype } else { value_dtype });
    ctx.check_alloc(&shape, dtype)?;
    full_of(ctx, shape, value, dtype)
}


fn scalar_tensor_op(ctx: &mut Ctx) -> OpResult {
    let v = ctx.num("s")?;
    let d = ctx.dtype("dtype").unwrap_or(Dtype::Float32);
    one(scalar_tensor(v, d, ctx.device())?)
}

fn arange(ctx: &mut Ctx) -> OpResult {
    let start = ctx.opt_num("start")?.unwrap_or(Num::Int(0));
    let end = ctx.num("end")?;
    let step = ctx.opt_num("step")?.unwrap_or(Num::Int(1));
    let all_int = [start, end, step].iter().all(|n| !matches!(n, Num::Float(_)));
    let dtype = ctx.dtype("dtype").unwrap_or(if all_int {
        Dtype::Int64
    } else {
        Dtype::Float32
    });
    if step.as_f64() == 0.0 {
        return Err(Error::bad_input("arange: step must be nonzero"));
    }
    let vals = if all_int {
        // exact: ceil((end - start) / step) and each value in integers
        let (s, e, st) = (start.as_i64() as i128, end.as_i64() as i128, step.as_i64() as i128);
        let span = e - s;
        let n = if (span > 0) == (st > 0) && span != 0 {
            (span + st - st.signum()) / st
        } else {
            0
        };
        let n = usize::try_from(n).map_err(|_| Error::bad_input("arange: too many elements"))?;
        Elems::I((0..n as i128).map(|i| (s + i * st) as i64).collect())
    } else {
        let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
        let n = ((e - s) / st).ceil();
        if !n.is_finite() {
            return Err(Error::bad_input(format!("arange: {n} elements from start {s}, end {e}, step {st}")));
        }
        let n = n.max(0.0) as usize;
        Elems::F((0..n).map(|i| s + i as f64 * st).collect())
    };
    let n = vals.len();
    one(from_elems(vals, &[n], dtype, ctx.device())?)
}

fn fill_scalar(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let v = ctx.num("value")?;
    full_of(ctx, x.dims().to_vec(), v, x.dtype)
}

/// The seed of the random ops (`rand`, `randn`, `randint` and their
/// `_like` forms): `PT2KIT_SEED` (an unsigned integer), else 0.
fn random_seed() -> Result<u64> {
    match crate::knobs::value("PT2KIT_SEED").map(|v| v.to_string_lossy().into_owned()) {
        None => Ok(0),
        Some(v) => v.trim().parse().map_err(|_| {
            Error::bad_input(format!(
                "PT2KIT_SEED={v:?}: expected an unsigned integer seed"
            ))
        }),
    }
}

/// splitmix64: the random ops' generator, one stream per node (seeded by
/// the seed and the node's name), so a run repeats and nodes differ.
/// torch's generators (MT19937, Philox) are not reproduced: values differ
/// from torch's, distributions, shapes and dtypes do not.
struct SplitMix(u64);

impl SplitMix {
    fn new(seed: u64, node: &str) -> SplitMix {
        // FNV-1a of the node's name, mixed with the seed
        let h = node.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        SplitMix(h ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) on a grid of 2^-bits (`bits` <= 53: exact in a
    /// float of that many significand bits, so never rounded up to 1).
    fn uniform_bits(&mut self, bits: u32) -> f64 {
        (self.next() >> (64 - bits)) as f64 / (1u64 << bits) as f64
    }

    fn uniform(&mut self) -> f64 {
        self.uniform_bits(53)
    }
}

/// `rand`, `randn`, `randint` (`.default`, `.low`) and `rand_like`,
/// `randn_like`, `randint_like`: uniform in [0, 1), standard normal
/// (Box-Muller), or integers uniform in [low, high); float32 unless a dtype
/// is given (int64 for `randint`). The values come from this toolkit's own
/// generator ([`SplitMix`], seeded by `PT2KIT_SEED`), not torch's.
fn random(ctx: &mut Ctx) -> OpResult {
    let name = ctx.node.target.name.clone();
    let like = name.ends_with("_like");
    let kind = name.trim_end_matches("_like");
    let (shape, base) = if like {
        let x = ctx.tensor("self")?;
        (x.dims().to_vec(), x.dtype)
    } else {
        let base = if kind == "randint" {
            Dtype::Int64
        } else {
            Dtype::Float32
        };
        (sizes_of(&ctx.ints("size")?)?, base)
    };
    let dtype = ctx.dtype("dtype").unwrap_or(base);
    ctx.check_alloc(&shape, dtype)?;
    let n: usize = shape.iter().product();
    let mut g = SplitMix::new(random_seed()?, &ctx.node.name);
    let vals = match kind {
        "rand" | "randn" if !dtype.is_floating() => {
            return Err(Error::bad_input(format!(
                "node {}: {name} makes a floating tensor, not {dtype}",
                ctx.node.name
            )));
        }
        "rand" => {
            let bits = match dtype {
                Dtype::Float64 => 53,
                Dtype::Float16 => 11,
                Dtype::BFloat16 => 8,
                _ => 24,
            };
            Elems::F((0..n).map(|_| g.uniform_bits(bits)).collect())
        }
        "randn" => Elems::F(
            (0..n)
                .map(|_| {
                    // Box-Muller: 1 - u is in (0, 1], so the log is finite
                    let (u, v) = (1.0 - g.uniform(), g.uniform());
                    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
                })
                .collect(),
        ),
        "randint" => {
            let low = if ctx.has("low") { ctx.int("low")? } else { 0 };
            let high = ctx.int("high")?;
            if high <= low {
                return Err(Error::bad_input(format!(
                    "node {}: randint: low {low} >= high {high}",
                    ctx.node.name
                )));
            }
            let span = (high as i128 - low as i128) as u128;
            let ints = (0..n).map(|_| (low as i128 + (g.next() as u128 % span) as i128) as i64);
            if dtype.is_floating() {
                Elems::F(ints.map(|i| i as f64).collect())
            } else {
                Elems::I(ints.collect())
            }
        }
        other => return Err(unsupported(other.to_string())),
    };
    one(from_elems(vals, &shape, dtype, ctx.device())?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::ZEROS, creation),
    (aten::ONES, creation),
    (aten::FULL, creation),
    (aten::EMPTY_MEMORY_FORMAT, creation),
    (aten::ZEROS_LIKE, creation),
    (aten::ONES_LIKE, creation),
    (aten::FULL_LIKE, creation),
    (aten::EMPTY_LIKE, creation),
    (aten::SCALAR_TENSOR, scalar_tensor_op),
    (aten::ARANGE, arange),
    (aten::ARANGE_START, arange),
    (aten::ARANGE_START_STEP, arange),
    (aten::FILL_SCALAR, fill_scalar),
    (aten::NEW_ONES, creation),
    (aten::NEW_ZEROS, creation),
    (aten::NEW_FULL, creation),
    (aten::RAND, random),
    (aten::RANDN, random),
    (aten::RANDINT, random),
    (aten::RANDINT_LOW, random),
    (aten::RAND_LIKE, random),
    (aten::RANDN_LIKE, random),
    (aten::RANDINT_LIKE, random),
    (aten::RANDINT_LIKE_LOW_DTYPE, random),
];
