//! How a float32 convolution of one group runs, chosen once from its
//! shapes into [`ConvParams`] (as MLAS's `MLAS_CONV_PARAMETERS`): the
//! windows, the output's shape, the algorithm, and how the output may be
//! given (an epilogue, channels-last, a folded scale). The thresholds
//! stand beside the predicates that read them, each with the measurement
//! that set it (docs/kernels.md).

use super::*;

/// What a convolution row asks for beside its operands: strides,
/// padding and dilation per spatial dim, and how its output may be given.
#[derive(Clone, Copy)]
pub(super) struct ConvArgs<'a> {
    pub(super) stride: &'a [usize],
    pub(super) pad: &'a [usize],
    pub(super) dil: &'a [usize],
    /// The fused chain after it, where the executor offers one.
    pub(super) epilogue: Option<&'a EpilogueArgs<'a>>,
    /// The output may be left channels-last (every reader reads it so).
    pub(super) channels_last: bool,
    /// A scale per input channel, to fold into the weight.
    pub(super) scale: Option<&'a [f32]>,
}

impl<'a> ConvArgs<'a> {
    /// Strides, padding and dilation alone: a fresh output in planes.
    pub(super) fn geometry_only(stride: &'a [usize], pad: &'a [usize], dil: &'a [usize]) -> ConvArgs<'a> {
        ConvArgs {
            stride,
            pad,
            dil,
            epilogue: None,
            channels_last: false,
            scale: None,
        }
    }

    /// Other strides, padding and dilation, the output given as these
    /// args say (no scale: the caller says where one goes).
    pub(super) fn geometry(self, stride: &'a [usize], pad: &'a [usize], dil: &'a [usize]) -> ConvArgs<'a> {
        ConvArgs {
            stride,
            pad,
            dil,
            scale: None,
            ..self
        }
    }
}

/// A float32 (or float64) convolution of one group as it will run: every
/// kernel call of `calls.rs` takes this, not a list of arguments.
pub(super) struct ConvParams<'a> {
    /// Spatial sizes of input, kernel and output; strides, padding,
    /// dilation.
    pub(super) g: Windows,
    /// The output's dims: `[b, c_out, spatial...]`.
    pub(super) shape: Vec<usize>,
    /// The algorithm chosen for its shapes ([`choose`]).
    pub(super) algorithm: Algorithm,
    pub(super) epilogue: Option<&'a EpilogueArgs<'a>>,
    pub(super) channels_last: bool,
    /// A scale per input channel the packed kernels fold into their
    /// packed weight (`None` once another kernel's weight is scaled).
    pub(super) scale: Option<&'a [f32]>,
}

impl<'a> ConvParams<'a> {
    /// The parameters of a convolution of an input of dims `xd` by a
    /// weight of dims `wd` (checked against each other).
    pub(super) fn new(xd: &[usize], wd: &[usize], args: ConvArgs<'a>) -> Result<ConvParams<'a>> {
        if xd.len() < 3 || wd.len() != xd.len() {
            return Err(Error::bad_input(format!(
                "convolution of {xd:?} with a weight of {wd:?}"
            )));
        }
        if wd[1] != xd[1] {
            return Err(Error::bad_input(format!(
                "convolution: input has {} channels, the weight expects {}",
                xd[1], wd[1]
            )));
        }
        let g = Windows::new(&xd[2..], &wd[2..], args.stride, args.pad, args.dil)?;
        let mut shape = vec![xd[0], wd[0]];
        shape.extend(&g.output[3 - (xd.len() - 2)..]);
        Ok(ConvParams {
            algorithm: choose(&g, xd, wd),
            g,
            shape,
            epilogue: args.epilogue,
            channels_last: args.channels_last,
            scale: args.scale,
        })
    }
}

/// The kernel [`conv_im2col`] runs a float32 convolution of one group on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Algorithm {
    /// A strided 1x1: its pixels subsampled, then pointwise ([`subsample`]).
    Subsampled,
    /// Output channels on the lanes from few input channels (a stem).
    FewChannels,
    /// 3x3 stride 1 over small planes by Winograd's F(2x2, 3x3)
    /// ([`conv_winograd`]).
    Winograd,
    /// Small planes with taps, the pixels as rows ([`conv_pixel_taps`]).
    PixelTaps,
    /// Direct, no im2col, for 2-D kernels with taps or strides, and
    /// pointwise ones over enough pixels from few channels ([`direct`]).
    Direct,
    /// The packed product as the input lies (pointwise; its small planes
    /// as pixel rows, [`packed_as_pixel_rows`]).
    Packed,
    /// im2col and the gemm crate: lines of fewer than 8 padded columns,
    /// 1-D, 3-D, no AVX-512.
    Host,
}

/// Which kernel a float32 convolution of input dims `xd` and weight dims
/// `wd` (one group) over `g` takes, in order of preference.
fn choose(g: &Windows, xd: &[usize], wd: &[usize]) -> Algorithm {
    let (b, c, co) = (xd[0], xd[1], wd[0]);
    if !crate::kernels::cpu().vector {
        Algorithm::Host
    } else if xd.len() == 4 && subsampled(g) {
        Algorithm::Subsampled
    } else if few_channels(g, c, co) {
        Algorithm::FewChannels
    } else if winograd(g, c, co) {
        Algorithm::Winograd
    } else if pixel_taps(g, c, co) {
        if packed_over_taps(b) {
            Algorithm::Packed
        } else {
            Algorithm::PixelTaps
        }
    } else if direct(g, b, c, co) && !packed_over_direct(g, b, c, co) {
        Algorithm::Direct
    } else if direct(g, b, c, co) || pointwise(g) {
        Algorithm::Packed
    } else {
        Algorithm::Host
    }
}

/// Whether a convolution is 1x1 with a stride (no padding, no dilation
/// that matters): it reads one pixel in `stride` of each line and line
/// ([`subsample`]).
fn subsampled(g: &Windows) -> bool {
    g.kernel == [1, 1, 1] && g.pad == [0, 0, 0] && g.stride != [1, 1, 1] && g.input[0] == 1
}

/// Whether a convolution of `b` images of `c` input channels runs direct
/// ([`conv_direct`]): 2-D, and either with taps or a stride over padded
/// lines of 8 columns or more (a panel of 32 lanes then holds at most five
/// runs of output columns), or pointwise over [`DIRECT_MIN_PIXELS`] or
/// more (an image's, or the batch's where its planes go side by side)
/// with at most [`DIRECT_MAX_CHANNELS`] (below and above, the packed
/// product measured faster), unless it takes [`conv_pixel_rows`] (see
/// [`pixel_rows`]).
fn direct(g: &Windows, b: usize, c: usize, co: usize) -> bool {
    let ([_, _, kw], [_, _, sw], [_, _, dw]) = (g.kernel, g.stride, g.dilation);
    // (no input channels: the output is the bias, which im2col's path gives)
    g.planar()
        && c > 0
        && if pointwise(g) {
            if pixel_rows(g.out_plane(), c, co) {
                return false;
            }
            let pixels = if crate::kernels::conv::direct::batched_planes(g, b) { b } else { 1 } * g.out_plane();
            pixels >= DIRECT_MIN_PIXELS && c <= DIRECT_MAX_CHANNELS
        } else {
            g.output[2] + (kw - 1) * dw / sw >= 8
        }
}

/// Whether a convolution the direct kernel would take ([`direct`]) of `b`
/// images, `c` to `co` channels, runs packed instead ([`conv_packed`]:
/// its im2col made block by block): on AVX2, where the packed product
/// goes rows outer ([`sgemm`]'s `rows_outer`, A's rows in L1 through a
/// block of B in L2) and the direct kernel runs each 6-row part over all
/// of `k` (A's rows and B's rows beside them outgrow L1), those with taps
/// or a stride, and pointwise ones at batch 1 to as many output channels
/// as input or more. Interleaved call by call on the 2-vCPU AVX2 VM
/// (`direct_or_packed_speed`), packed / direct at batch 1 on one / two
/// threads: 3x3s `[64, 64]` over 56x56 0.84 / 0.82, stride 2 `[128, 128]`
/// 0.83 / 0.75 (at batch 8 0.77-0.85); pointwise `[256, 64]` over 56x56
/// 0.63 / 0.76, `[512, 128]` over 28x28 0.71 / 0.77, MobileNetV3's `[72,
/// 16]` 0.87 / 0.84, `[88, 24]` 0.90 / 0.99, `[288, 48]` 0.92 / 0.91.
/// Fewer output channels than input lost (`[24, 88]` 1.24 / 1.27,
/// `[64, 256]` 1.05 / 0.98: the copy of B weighs against fewer rows of
/// A), and so did pointwise ones at batch 8 (`[256, 64]` 1.34, MobileNetV3's
/// 28x28 ones 1.0-1.4 on two threads, the images side by side transposed
/// after). With the next block of each row fetched as a block is filled,
/// pointwise ones to more channels than input over planes the packed
/// product takes image by image ([`PACKED_IMAGE_MIN`] pixels or more)
/// run packed at any batch (batch 8: `[256, 64]` over 56x56 0.67x,
/// `[72, 16]` 0.85-0.96x; `[16, 16]` lost, 1.08x, and `[64, 64]` was
/// within 10%, so only more output channels than input). AVX-512 keeps
/// the direct kernel (not measured there).
fn packed_over_direct(g: &Windows, b: usize, c: usize, co: usize) -> bool {
    let one_by_one = b == 1 || g.out_plane() >= PACKED_IMAGE_MIN;
    !crate::kernels::cpu().wide && (!pointwise(g) || (b == 1 && co >= c) || (one_by_one && co > c))
}

/// Whether a convolution of `b` images that [`pixel_taps`] names runs
/// packed instead ([`conv_packed`], as [`packed_over_direct`] says): on
/// AVX2, at a batch of more than one (`taps_or_packed_speed`,
/// interleaved, packed / pixel taps on one / two threads, batch 8:
/// ResNet's stride-2 3x3s 0.86-0.97 / 0.83-1.02, its 3x3s over 14x14 and
/// 7x7 0.97-1.0 / 0.99-1.02). At batch 1 the pixel rows stay: in quiet
/// minutes packed took 0.99-1.07x over 14x14 planes and 1.19-1.22x over
/// 7x7 (in loud ones 0.78-0.80x).
fn packed_over_taps(b: usize) -> bool {
    !crate::kernels::cpu().wide && b > 1
}

/// Whether the kernel [`conv_im2col`] picks for a float32 convolution of
/// one group ([`kernel`]) writes its output over a dead residual where
/// offered ([`output_of`]): the direct one, the pixel rows of taps, and
/// those of a pointwise product over more than one pixel, a strided 1x1's
/// too (a pointwise one over the pixels it reads).
pub(super) fn writes_over(g: &Windows, xd: &[usize], wd: &[usize]) -> bool {
    match choose(g, xd, wd) {
        Algorithm::Subsampled => {
            let [_, oh, ow] = g.output;
            Windows::new(&[oh, ow], &[1, 1], &[1, 1], &[0, 0], &[1, 1])
                .is_ok_and(|p| writes_over(&p, &[xd[0], xd[1], oh, ow], wd))
        }
        Algorithm::Winograd | Algorithm::PixelTaps | Algorithm::Direct => true,
        Algorithm::Packed => pointwise(g) && packed_as_pixel_rows(g, xd[0], xd[1], wd[0]) && g.out_plane() > 1,
        Algorithm::FewChannels | Algorithm::Host => false,
    }
}

/// Whether [`conv_packed`] of `b` images of `c` channels to `co` takes
/// [`conv_pixel_rows`].
pub(super) fn packed_as_pixel_rows(g: &Windows, b: usize, c: usize, co: usize) -> bool {
    let n = g.out_plane();
    b * n < FEW_PIXELS || pixel_rows(n, c, co)
}

/// Whether a pointwise convolution over `n` output pixels a plane from
/// `c` input channels to `co` takes [`conv_pixel_rows`].
pub(super) fn pixel_rows(n: usize, c: usize, co: usize) -> bool {
    n <= PIXEL_ROWS_MAX
        || (n <= PIXEL_ROWS_DEEP_MAX && c >= PIXEL_ROWS_DEEP_CHANNELS)
        || (n <= PIXEL_ROWS_BATCH_MAX && c >= PIXEL_ROWS_BATCH_CHANNELS)
        || (n <= PIXEL_ROWS_EXPAND_MAX && co > c && !crate::kernels::cpu().wide)
}

/// A pointwise convolution over fewer pixels runs packed: the images
/// side by side fill the kernel's panels (ResNet-50's 7x7 stage at batch
/// 8, `[2048, 512]`: 320 GFLOP/s packed, 250 direct).
const DIRECT_MIN_PIXELS: usize = 128;

/// A pointwise convolution over more input channels runs packed: direct,
/// B's rows for one panel (`c` lines apart) outgrow the L1 cache, where
/// the packed product reads them in slices of [`sgemm::KC`] (ResNet-50's
/// `[256, 1024]` at 14x14, batch 8: 370 GFLOP/s packed, 315 direct; its
/// `[512, 128]` at 28x28: 214 packed, 350 direct).
const DIRECT_MAX_CHANNELS: usize = 256;

/// Planes of up to this many pixels take [`conv_pixel_rows`] at any batch
/// (MobileNetV3 at batch 8 5.65 -> 5.46 ms, ResNet-50 199 -> 194 ms;
/// up to 14x14 planes, MobileNetV3 was slower: 5.33 -> 5.91).
const PIXEL_ROWS_MAX: usize = 64;

/// Planes of up to this many pixels take [`conv_pixel_rows`] too from
/// [`PIXEL_ROWS_DEEP_CHANNELS`] input channels (ResNet-50's `[256, 1024]`
/// at 14x14: 265 -> 371 GFLOP/s at batch 1, 296 -> 425 at batch 8, the
/// model 0.93x at batch 1; its `[128, 512]` at 28x28 0.91 -> 0.74 ms for
/// the three at batch 1, 8.7 -> 6.2 at batch 8; MobileNetV3's 40 to 240
/// channels were slower that way).
const PIXEL_ROWS_DEEP_MAX: usize = 784;

/// See [`PIXEL_ROWS_DEEP_MAX`].
const PIXEL_ROWS_DEEP_CHANNELS: usize = 512;

/// Planes of up to [`PIXEL_ROWS_BATCH_MAX`] pixels take [`conv_pixel_rows`]
/// from this many input channels, where the direct kernel would copy a
/// batch's planes side by side first (ResNet-50's `[1024, 256]` at 14x14,
/// batch 8: 15.5 -> 13.5 ms for its six, 319 -> 367 GFLOP/s, the model
/// 0.98x) or leave lanes idle (196 pixels in panels of 32; at batch 1
/// each of the six 0.88x of the direct kernel's time, interleaved, once
/// the product wrote over its residual; it had been slower there).
const PIXEL_ROWS_BATCH_CHANNELS: usize = 256;

/// See [`PIXEL_ROWS_BATCH_CHANNELS`].
const PIXEL_ROWS_BATCH_MAX: usize = 196;

/// On AVX2, pointwise convolutions to more channels than they read
/// (an inverted residual's expansion) over planes of up to this many
/// pixels take [`conv_pixel_rows`] at any batch. MobileNetV3 at batch 8,
/// per node against the direct kernel, interleaved, two threads: its
/// 14x14 expansions 0.81-0.89x of their time (`[288, 48]` 0.48 -> 0.39
/// ms), the model's least 10.84 -> 10.63 ms; at 28x28 (784 pixels) they
/// lost 1.0-1.45x, and 14x14 projections (`[40, 240]`) were level. At
/// batch 1 (packed before) the 14x14 expansions 0.62-0.67x. AVX-512
/// keeps the rules above (not measured there).
const PIXEL_ROWS_EXPAND_MAX: usize = 196;

/// Output planes below this many pixels take the transposed product
/// ([`conv_pixel_rows`]).
const FEW_PIXELS: usize = 64;
