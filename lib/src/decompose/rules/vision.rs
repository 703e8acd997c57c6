//! torchvision's detection ops: no decomposition. torchvision registers
//! none for `roi_align`, `roi_pool`, `ps_roi_align`, `ps_roi_pool`, `nms`
//! or `deform_conv2d` (their Python references are loops over boxes, not
//! ATen graphs), and they are not `aten` ops, so `ir-decompose` keeps them
//! as they are (`decompose::is_core` passes every op outside `aten`) and
//! `--stats` lists them; `ir-run` and `ir2onnx` have rows for them.

use super::*;

rules! {}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
